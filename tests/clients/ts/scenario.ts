// One scenario through the TypeScript client generated from the live /openapi.json: openapi-typescript
// writes generated/schema.d.ts, openapi-fetch calls the service with those types, and `tsc --strict`
// checks this file against them. The same steps as tests/clients/scenario.py; to cover a new route, add
// a step function and list it in STEPS. Configuration comes in IDENTITY_SCENARIO (JSON): base_url,
// keys {admin, user, limited} and user_wallet. It prints one line per step and exits non-zero on a failure.
import createClient from "openapi-fetch";
import type { components, paths } from "./generated/schema.js";

declare const process: { env: Record<string, string | undefined>; exitCode?: number };

type Problem = components["schemas"]["Problem"];
type Identity = components["schemas"]["Identity"];
type IdentityCreate = components["schemas"]["IdentityCreate"];

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
}

async function problems() {
  const wrong = client("idsk_wrong");
  const path = { params: { path: { identity_id: unknown } } };
  isProblem((await wrong.GET("/identity/{identity_id}", path)).error, 401);
  isProblem((await user.GET("/identity/{identity_id}", path)).error, 404);
  const invalid = isProblem((await user.GET("/changes", { params: { query: { limit: 0 } } })).error, 400);
  check(invalid.errors?.limit !== undefined, "the 400 names limit");
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
  ["problems", problems],
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
