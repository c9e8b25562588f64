// One scenario through the TypeScript client generated from the live /openapi.json: openapi-typescript
// writes generated/schema.d.ts, openapi-fetch calls the service with those types, and `tsc --strict`
// checks this file against them. The same steps as tests/clients/scenario.py; to cover a new route, add
// a step function and list it in STEPS (the wallet proofs' steps are in wallet_steps.ts). Configuration comes in IDENTITY_SCENARIO (JSON): base_url,
// keys {admin, user, limited} and user_wallet. It prints one line per step and exits non-zero on a failure.
import createClient from "openapi-fetch";
import type { components, paths } from "./generated/schema.js";
import { walletSteps } from "./wallet_steps.js";

declare const process: { env: Record<string, string | undefined>; exitCode?: number };

type Problem = components["schemas"]["Problem"];
type Identity = components["schemas"]["Identity"];
type IdentityCreate = components["schemas"]["IdentityCreate"];
type IssuedKey = components["schemas"]["IssuedKey"];
type Me = components["schemas"]["Me"];

const config = JSON.parse(process.env.IDENTITY_SCENARIO ?? "{}") as {
  base_url: string;
  keys: { admin: string; user: string; limited: string };
  user_wallet: string;
};
// The media types this client reads: JSON, problem details (application/problem+json) included. GET
// /changes also documents a text/event-stream answer (feed=eventsource), which a JSON client does not
// ask for; openapi-fetch's Media type parameter leaves it out of the answer's type.
type Json = `${string}/${string}json`;
const client = (key: string) => createClient<paths, Json>({ baseUrl: config.base_url, headers: { "x-api-key": key } });
const admin = client(config.keys.admin);
const user = client(config.keys.user);
const anonymous = createClient<paths, Json>({ baseUrl: config.base_url });
const tag = Math.random().toString(36).slice(2, 14);
const unknown = "did:identity:ipfs:bafkreibm6jg3ux5qumhcn2b3flc3tyu6dmlb4xa7u5bvkuxqxdpmydhvfa";

function check(condition: unknown, what: string): asserts condition {
  if (!condition) throw new Error(what);
}

function isProblem(error: Problem | undefined, status: number): Problem {
  check(error !== undefined, `expected a ${status} problem, got none`);
  check(error.status === status && error.title.length > 0 && error.detail.length > 0, `not a ${status} problem: ${JSON.stringify(error)}`);
  return error;
}

let identity: Identity;
let body: IdentityCreate;
let etag = "";
let staleEtag = "";
let head = 0;
let readKey: IssuedKey;
let rotatedReadKey: IssuedKey;
let ownKey: IssuedKey;
// How long a revoked key may still be accepted: the server's IDENTITY_KEY_CACHE_SECONDS, and some slack.
const REFUSAL_DEADLINE_MS = 10_000;

async function healthAndReadiness() {
  for (const path of ["/healthz", "/readyz"] as const) {
    const { data, response } = await anonymous.GET(path);
    check(response.status === 200 && data?.status === "ok", `${path} answered ${response.status}`);
  }
}

async function create() {
  body = {
    display_name: `Ada Lovelace ${tag}`,
    description: "First programmer",
    image: "https://example.org/ada.png",
    external_reference: "https://example.org/ada",
  };
  const { data, response } = await user.POST("/identity", { body });
  check(response.status === 201 && data !== undefined, `create answered ${response.status}`);
  check(data.status === "complete", "a new identity is complete");
  check(response.headers.get("Location") === `/identity/${data.identity_id}`, "Location names the identity");
  identity = data;
}

async function fetchIt() {
  const { data, response } = await user.GET("/identity/{identity_id}", {
    params: { path: { identity_id: identity.identity_id } },
  });
  check(response.status === 200 && data?.identity_id === identity.identity_id, "fetch");
  check(data.creator.wallet === config.user_wallet, "the creator is the user's wallet");
  etag = response.headers.get("ETag") ?? "";
  check(etag !== "", "an ETag");
}

async function notModified() {
  const { data, response } = await user.GET("/identity/{identity_id}", {
    params: { path: { identity_id: identity.identity_id }, header: { "If-None-Match": etag } },
  });
  check(response.status === 304 && data === undefined, `If-None-Match answered ${response.status}`);
}

async function conflict() {
  const { error, response } = await admin.POST("/identity", { body });
  check(response.status === 409, `same content answered ${response.status}`);
  check(isProblem(error, 409).identity_id === identity.identity_id, "the 409 names the existing identity");
}

async function content() {
  const { data, response } = await user.GET("/identity/{identity_id}/content", {
    params: { path: { identity_id: identity.identity_id } },
  });
  check(response.status === 200 && data?.display_name === body.display_name, "content");
}

async function listAndFollowNext() {
  for (const n of [0, 1]) {
    const { response } = await user.POST("/identity", { body: { display_name: `Listed ${n} ${tag}` } });
    check(response.status === 201, "create for the listing");
  }
  let { data: page } = await user.GET("/identities", { params: { query: { creator: config.user_wallet, limit: 1 } } });
  check(page !== undefined && page.total >= 3, "first page");
  const total = page.total;
  const seen = page.data.map((item) => item.identity_id);
  while (page?.next) {
    ({ data: page } = await user.GET("/identities", { params: { query: { cursor: page.next } } }));
    check(page !== undefined, "next page");
    seen.push(...page.data.map((item) => item.identity_id));
  }
  check(seen.length === total && new Set(seen).size === total, `visited ${seen.length} of ${total}`);
}

async function search() {
  const { data } = await user.GET("/identities", { params: { query: { q: `ada ${tag}` } } });
  check(data?.data.length === 1 && data.data[0].identity_id === identity.identity_id, "search finds it");
}

async function patchIfMatch() {
  const fetched = await admin.GET("/identity/{identity_id}", { params: { path: { identity_id: identity.identity_id } } });
  staleEtag = fetched.response.headers.get("ETag") ?? "";
  const { data, response } = await admin.PATCH("/identity/{identity_id}", {
    params: { path: { identity_id: identity.identity_id }, header: { "If-Match": staleEtag } },
    body: { status: "pending", num_positions: Number.MAX_SAFE_INTEGER, vault_id: "4242" },
  });
  check(response.status === 200 && data?.num_positions === Number.MAX_SAFE_INTEGER, `PATCH answered ${response.status}`);
  check(data.status === "pending", "status changed");
}

async function preconditionFailed() {
  const { error, response } = await admin.PATCH("/identity/{identity_id}", {
    params: { path: { identity_id: identity.identity_id }, header: { "If-Match": staleEtag } },
    body: { status: "complete" },
  });
  check(response.status === 412, `stale If-Match answered ${response.status}`);
  isProblem(error, 412);
}

async function removeThenGone() {
  const { response } = await admin.PATCH("/identity/{identity_id}", {
    params: { path: { identity_id: identity.identity_id } },
    body: { status: "removed" },
  });
  check(response.status === 200, "removal");
  const gone = await user.GET("/identity/{identity_id}", { params: { path: { identity_id: identity.identity_id } } });
  check(gone.response.status === 410, `a removed identity answered ${gone.response.status}`);
  check(isProblem(gone.error, 410).identity_id === identity.identity_id, "the 410 names the identity");
}

async function history() {
  const { data } = await admin.GET("/identity/{identity_id}/changes", {
    params: { path: { identity_id: identity.identity_id } },
  });
  check(data?.data.map((entry) => entry.kind).join() === "created,changed,changed", "history");
}

async function feed() {
  let after = 0;
  const seqs: number[] = [];
  let mine = 0;
  for (;;) {
    const { data } = await admin.GET("/changes", { params: { query: { after, limit: 1000 } } });
    check(data !== undefined, "feed page");
    if (data.data.length === 0) break;
    for (const entry of data.data) {
      seqs.push(entry.seq);
      if (entry.identity_id === identity.identity_id) mine += 1;
    }
    after = data.next_after;
  }
  check(mine === 3 && seqs.every((seq, i) => i === 0 || seq > seqs[i - 1]), "feed in order, each entry once");
  head = after;
}

async function longPoll() {
  const { data, response } = await admin.GET("/changes", {
    params: { query: { feed: "longpoll", timeout: 1000, after: 0, limit: 2 } },
  });
  check(response.status === 200 && data !== undefined, `longpoll answered ${response.status}`);
  check(response.headers.get("Content-Type")?.startsWith("application/json") === true, "longpoll answers JSON");
  check(data.data.length === 2 && data.next_after === data.data[1].seq, "longpoll gives the page at once");
  check(data.data[0].kind === "created", "the first entry is a create");
}

async function longPollTimesOut() {
  const { data, response } = await admin.GET("/changes", {
    params: { query: { feed: "longpoll", timeout: 200, after: head } },
  });
  check(response.status === 200 && data !== undefined, `longpoll answered ${response.status}`);
  check(data.data.length === 0 && data.next_after === head, "a timed-out longpoll is an empty page at after");
}

async function meOf(key: string): Promise<Me> {
  const { data, response } = await client(key).GET("/me");
  check(response.status === 200 && data !== undefined, `GET /me answered ${response.status}`);
  return data;
}

async function refused(key: string) {
  const deadline = Date.now() + REFUSAL_DEADLINE_MS;
  for (;;) {
    const { error, response } = await client(key).GET("/me");
    if (response.status === 401) {
      isProblem(error, 401);
      return;
    }
    check(response.status === 200, `GET /me answered ${response.status}`);
    check(Date.now() < deadline, "a revoked key still works");
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function me() {
  const found = await meOf(config.keys.user);
  check(found.user.wallet === config.user_wallet && found.key.wallet === config.user_wallet, "me is the user");
  check(found.key.scope === "write" && !JSON.stringify(found).includes(config.keys.user), "me shows no secret");
}

async function createKey() {
  const label = `status page ${tag}`;
  const { data, response } = await admin.POST("/keys", {
    body: { wallet: config.user_wallet.toLowerCase(), scope: "read", label, expires_in: 3600 },
  });
  check(response.status === 201 && data !== undefined, `POST /keys answered ${response.status}`);
  check(data.wallet === config.user_wallet && data.role === "User" && data.scope === "read", "the key's user and scope");
  check(data.label === label && data.expires_at !== null && data.revoked_at === null && data.key.length > 0, "issued");
  check(response.headers.get("Location") === `/keys/${data.id}`, "Location names the key");
  readKey = data;
}

async function listKeysAndFollowNext() {
  let { data: page } = await admin.GET("/keys", { params: { query: { wallet: config.user_wallet.toLowerCase(), limit: 1 } } });
  check(page !== undefined && page.total === 2, "the user's two keys");
  check(!JSON.stringify(page).includes(readKey.key), "a listing has no secrets");
  const total = page.total;
  const seen = page.data.map((key) => key.id);
  while (page?.next) {
    ({ data: page } = await admin.GET("/keys", { params: { query: { cursor: page.next } } }));
    check(page !== undefined && !JSON.stringify(page).includes(readKey.key), "next page, without secrets");
    seen.push(...page.data.map((key) => key.id));
  }
  check(seen.length === total && new Set(seen).size === total && seen.includes(readKey.id), `listed ${seen.length} of ${total}`);
}

async function getKey() {
  const { data, response } = await admin.GET("/keys/{key_id}", { params: { path: { key_id: readKey.id } } });
  check(response.status === 200 && data?.id === readKey.id && data.label === readKey.label, "GET /keys/{key_id}");
  check(!JSON.stringify(data).includes(readKey.key), "a key's record has no secret");
}

async function readKeyIsReadOnly() {
  const { error, response } = await client(readKey.key).POST("/identity", { body: { display_name: `Read only ${tag}` } });
  check(response.status === 403, `a read key's create answered ${response.status}`);
  check(isProblem(error, 403).detail.includes("read-only"), "the 403 says the key is read-only");
  check((await meOf(readKey.key)).key.scope === "read", "a read key reads");
}

async function rotateKeyWithGrace() {
  const path = { params: { path: { key_id: readKey.id } } };
  const { data, response } = await admin.POST("/keys/{key_id}/rotate", { ...path, body: { grace_seconds: 600 } });
  check(response.status === 201 && data !== undefined, `rotate answered ${response.status}`);
  check(data.id !== readKey.id && data.key !== readKey.key, "a new key");
  check(data.scope === readKey.scope && data.label === readKey.label && data.expires_at === readKey.expires_at, "same terms");
  check((await meOf(readKey.key)).key.id === readKey.id, "the old key works within the grace");
  check((await meOf(data.key)).key.id === data.id, "the new key works");
  const old = (await admin.GET("/keys/{key_id}", path)).data;
  check(old?.revoked_at != null && Date.parse(old.revoked_at) > Date.parse(data.created_at), "the old key stops later");
  const again = await admin.POST("/keys/{key_id}/rotate", { ...path, body: { grace_seconds: 0 } });
  check(again.response.status === 409, `a second rotation answered ${again.response.status}`);
  isProblem(again.error, 409);
  rotatedReadKey = data;
}

async function rotateMyKey() {
  const issued = await admin.POST("/keys", { body: { wallet: config.user_wallet, scope: "write", label: `ci ${tag}` } });
  check(issued.data !== undefined, `POST /keys answered ${issued.response.status}`);
  const { data, response } = await client(issued.data.key).POST("/me/key/rotate", { body: { grace_seconds: 0 } });
  check(response.status === 201 && data !== undefined, `rotateMyKey answered ${response.status}`);
  check(data.id !== issued.data.id && data.label === issued.data.label && data.scope === "write", "same terms");
  check(data.created_by === config.user_wallet, "issued by the user itself");
  check((await meOf(data.key)).key.id === data.id, "the new key works");
  await refused(issued.data.key);
  ownKey = data;
}

async function revokeKey() {
  const path = { params: { path: { key_id: rotatedReadKey.id } } };
  const { response } = await admin.DELETE("/keys/{key_id}", path);
  check(response.status === 204, `revokeKey answered ${response.status}`);
  await refused(rotatedReadKey.key);
  check((await admin.GET("/keys/{key_id}", path)).data?.revoked_at != null, "revoked_at is set");
}

async function revokeMyKey() {
  const { response } = await client(ownKey.key).DELETE("/me/key");
  check(response.status === 204, `revokeMyKey answered ${response.status}`);
  await refused(ownKey.key);
}

async function getUser() {
  const { data, response } = await user.GET("/users/{wallet}", {
    params: { path: { wallet: config.user_wallet.toLowerCase() } },
  });
  check(response.status === 200 && data?.wallet === config.user_wallet, `getUser answered ${response.status}`);
  const listed = await user.GET("/identities", { params: { query: { creator: config.user_wallet } } });
  check(data.identity_count === 2 && listed.data?.total === 2, "identity_count counts all but the removed one");
  check(data.role === "User" && data.api_key === "", "the user");
}

async function keyProblems() {
  isProblem((await admin.GET("/keys", { params: { query: { cursor: "not-a-cursor" } } })).error, 400);
  isProblem((await user.GET("/keys")).error, 403);
  isProblem((await client(readKey.key).POST("/me/key/rotate", { body: { grace_seconds: 0 } })).error, 403);
  const nowhere = { params: { path: { key_id: crypto.randomUUID() } } };
  isProblem((await admin.GET("/keys/{key_id}", nowhere)).error, 404);
  isProblem((await admin.DELETE("/keys/{key_id}", nowhere)).error, 404);
  const nobody = "0x" + Array.from(crypto.getRandomValues(new Uint8Array(20)), (b) => b.toString(16).padStart(2, "0")).join("");
  isProblem((await user.GET("/users/{wallet}", { params: { path: { wallet: nobody } } })).error, 404);
  const revoked = { params: { path: { key_id: rotatedReadKey.id } }, body: { grace_seconds: 0 } };
  isProblem((await admin.POST("/keys/{key_id}/rotate", revoked)).error, 409);
  const short = { wallet: config.user_wallet, scope: "write" as const, expires_in: 10 };
  const invalid = isProblem((await admin.POST("/keys", { body: short })).error, 422);
  check(invalid.errors?.expires_in !== undefined, "the 422 names expires_in");
}

async function webhooks() {
  const url = `https://hooks.example.com/identity/${tag}`;
  const created = await admin.POST("/webhooks", { body: { url } });
  const webhook = created.data;
  check(created.response.status === 201 && webhook !== undefined, `createWebhook answered ${created.response.status}`);
  check(webhook.secret.startsWith("whsec_"), "the 201 carries the secret");
  const id = { params: { path: { webhook_id: webhook.id } } };
  const fetched = await admin.GET("/webhooks/{webhook_id}", id);
  check(fetched.data?.url === url && !("secret" in fetched.data), "getWebhook shows it without its secret");
  const listed = await admin.GET("/webhooks");
  check(listed.data?.data.some((each) => each.id === webhook.id) === true, "listWebhooks lists it");
  const paused = await admin.PATCH("/webhooks/{webhook_id}", { ...id, body: { active: false } });
  check(paused.response.status === 200 && paused.data?.active === false, "updateWebhook pauses it");
  const deliveries = await admin.GET("/webhooks/{webhook_id}/deliveries", id);
  check(deliveries.response.status === 200 && Array.isArray(deliveries.data?.data), "listWebhookDeliveries answers");
  check((await admin.DELETE("/webhooks/{webhook_id}", id)).response.status === 204, "deleteWebhook answers 204");
  isProblem((await admin.GET("/webhooks/{webhook_id}", id)).error, 404);
  isProblem((await admin.POST("/webhooks", { body: { url: "http://127.0.0.1/hook" } })).error, 422);
  isProblem((await user.GET("/webhooks")).error, 403);
}

async function feedWithDocs() {
  const { data, response } = await admin.GET("/changes", { params: { query: { include_docs: true, limit: 5 } } });
  check(response.status === 200 && data !== undefined && data.data.length > 0, `listChanges answered ${response.status}`);
  check(data.data.every((entry) => entry.doc?.identity_id === entry.identity_id), "each entry carries its Identity");
  check(Number(response.headers.get("Feed-Head")) >= data.next_after, "Feed-Head names the feed's last seq");
}

async function mirrors() {
  const url = `https://upstream-${tag}.example.org`;
  const key = `idsk_${tag}_the_upstreams_key`;
  const created = await admin.POST("/mirrors", { body: { url, key } });
  const mirror = created.data;
  check(created.response.status === 201 && mirror !== undefined, `createMirror answered ${created.response.status}`);
  check(mirror.url === url && !JSON.stringify(mirror).includes(key), "the 201 shows the mirror without its key");
  const id = { params: { path: { mirror_id: mirror.id } } };
  const fetched = await admin.GET("/mirrors/{mirror_id}", id);
  check(fetched.data?.position === 0 && fetched.data.lag_entries === 0, "getMirror shows its position and lag");
  const listed = await admin.GET("/mirrors");
  check(listed.data?.data.some((each) => each.id === mirror.id) === true, "listMirrors lists it");
  const paused = await admin.PATCH("/mirrors/{mirror_id}", { ...id, body: { active: false } });
  check(paused.response.status === 200 && paused.data?.active === false, "updateMirror pauses it");
  isProblem((await admin.POST("/mirrors", { body: { url, key } })).error, 409);
  isProblem((await admin.POST("/mirrors", { body: { url: "ftp://x", key } })).error, 422);
  check((await admin.DELETE("/mirrors/{mirror_id}", id)).response.status === 204, "deleteMirror answers 204");
  isProblem((await admin.GET("/mirrors/{mirror_id}", id)).error, 404);
  isProblem((await user.GET("/mirrors")).error, 403);
}

async function problems() {
  const wrong = client("idsk_wrong");
  const path = { params: { path: { identity_id: unknown } } };
  isProblem((await wrong.GET("/identity/{identity_id}", path)).error, 401);
  isProblem((await user.GET("/identity/{identity_id}", path)).error, 404);
  const invalid = isProblem((await user.GET("/changes", { params: { query: { limit: 0 } } })).error, 400);
  check(invalid.errors?.limit !== undefined, "the 400 names limit");
  // A position beyond every seq the feed ever issued (a restore of an older backup, another service).
  const beyond = isProblem((await user.GET("/changes", { params: { query: { after: head + 1000000 } } })).error, 409);
  check(typeof beyond.feed_end === "number" && beyond.feed_end >= head, "the 409 names the feed's end");
  const other = { display_name: `Not mine ${tag}`, creator: "0x" + "ab".repeat(20) };
  isProblem((await user.POST("/identity", { body: other })).error, 403);
  isProblem((await user.POST("/identity", { body: { display_name: "Large", description: "x".repeat(70000) } })).error, 413);
  isProblem((await user.POST("/identity", { body: { display_name: "Bad image", image: "ftp://example.org/a.png" } })).error, 422);
  const limited = client(config.keys.limited);
  for (let n = 0; n < 100; n++) {
    const { error, response } = await limited.POST("/identity", { body: { display_name: `Budget ${n} ${tag}` } });
    if (response.status === 429) {
      isProblem(error, 429);
      return;
    }
  }
  throw new Error("the limited key never ran out of its create budget");
}

const STEPS: [string, () => Promise<void>][] = [
  ["health_and_readiness", healthAndReadiness],
  ["create", create],
  ["fetch", fetchIt],
  ["not_modified", notModified],
  ["conflict", conflict],
  ["content", content],
  ["list_and_follow_next", listAndFollowNext],
  ["search", search],
  ["patch_if_match", patchIfMatch],
  ["precondition_failed", preconditionFailed],
  ["remove_then_gone", removeThenGone],
  ["history", history],
  ["feed", feed],
  ["long_poll", longPoll],
  ["long_poll_times_out", longPollTimesOut],
  ["problems", problems],
  ["me", me],
  ["create_key", createKey],
  ["list_keys_and_follow_next", listKeysAndFollowNext],
  ["get_key", getKey],
  ["read_key_is_read_only", readKeyIsReadOnly],
  ["rotate_key_with_grace", rotateKeyWithGrace],
  ["rotate_my_key", rotateMyKey],
  ["revoke_key", revokeKey],
  ["revoke_my_key", revokeMyKey],
  ["get_user", getUser],
  ["key_problems", keyProblems],
  ["webhooks", webhooks],
  ["feed_with_docs", feedWithDocs],
  ["mirrors", mirrors],
  ...walletSteps({ anonymous, user, client, tag }),
];

for (const [name, step] of STEPS) {
  try {
    await step();
    console.log(`ok ${name}`);
  } catch (error) {
    console.log(`failed ${name}: ${error instanceof Error ? error.message : String(error)}`);
    process.exitCode = 1;
    break;
  }
}
