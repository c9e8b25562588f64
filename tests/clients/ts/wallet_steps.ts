// The scenario's steps of wallet proofs (the same as tests/clients/wallet_steps.py), through the generated
// TypeScript client, with ethers as the wallet: it signs in with a personal_sign of an EIP-4361 message, then
// signs its create's typed data, which anyone verifies from the fetched Identity with verifyTypedData.
import { Wallet, verifyTypedData } from "ethers";
import type { Client } from "openapi-fetch";
import type { components, paths } from "./generated/schema.js";

type Json = `${string}/${string}json`;
type Problem = components["schemas"]["Problem"];

export interface Context {
  anonymous: Client<paths, Json>;
  user: Client<paths, Json>;
  client: (key: string) => Client<paths, Json>;
  tag: string;
}

function check(condition: unknown, what: string): asserts condition {
  if (!condition) throw new Error(what);
}

function isProblem(error: Problem | undefined, status: number): Problem {
  check(error !== undefined && error.status === status && error.detail.length > 0, `not a ${status} problem`);
  return error;
}

// A message as the EIP's grammar lays it out: a statement between two empty lines, no final line feed.
function siweMessage(domain: string, address: string, nonce: string, uri: string): string {
  return [
    `${domain} wants you to sign in with your Ethereum account:`, address, "", "Sign in to the Identity service.", "",
    `URI: ${uri}`, "Version: 1", "Chain ID: 1", `Nonce: ${nonce}`, `Issued At: ${new Date().toISOString()}`,
  ].join("\n");
}

export function walletSteps(context: Context): [string, () => Promise<void>][] {
  const wallet = new Wallet(Wallet.createRandom().privateKey);
  let walletKey = "";

  async function signInWithEthereum() {
    const offered = await context.anonymous.GET("/auth/nonce");
    check(offered.response.status === 200 && offered.data !== undefined, `getSigninNonce answered ${offered.response.status}`);
    const { domain, nonce, uri } = offered.data;
    const message = siweMessage(domain, wallet.address, nonce, uri);
    const body = { message, signature: await wallet.signMessage(message), label: `scenario ${context.tag}` };
    const { data, response } = await context.anonymous.POST("/auth/siwe", { body });
    check(response.status === 201 && data !== undefined, `signInWithEthereum answered ${response.status}`);
    check(data.user.wallet === wallet.address && data.wallet === wallet.address, "the key is the wallet's");
    check(data.created_by === "siwe" && data.label === body.label && data.scope === "write", "issued by siwe");
    walletKey = data.key;
    const me = await context.client(walletKey).GET("/me");
    check(me.data?.key.id === data.id, "the signed-in key works");
    const replayed = await context.anonymous.POST("/auth/siwe", { body });
    check(replayed.response.status === 401, `a replayed sign-in answered ${replayed.response.status}`);
    isProblem(replayed.error, 401);
  }

  async function signedCreate() {
    const own = context.client(walletKey);
    const body = { display_name: `Signed ${context.tag}` };
    const previewed = await own.POST("/identity/preview", { body });
    check(previewed.data !== undefined && !previewed.data.exists, `previewIdentity answered ${previewed.response.status}`);
    const typed = previewed.data.typed_data;
    // ethers derives EIP712Domain from the domain's fields itself.
    const { EIP712Domain: _domainType, ...types } = typed.types;
    const signature = await wallet.signTypedData(typed.domain, types, typed.message);
    const created = await own.POST("/identity", { body: { ...body, signature } });
    check(created.response.status === 201 && created.data !== undefined, `a signed create answered ${created.response.status}`);
    const fetched = await context.user.GET("/identity/{identity_id}", {
      params: { path: { identity_id: created.data.identity_id } },
    });
    check(fetched.data?.creator_signature != null, "the fetched identity carries creator_signature");
    const contentId = fetched.data.identity_id.split(":").pop() ?? "";
    const signer = verifyTypedData(
      { name: "Identity", version: "1" }, { Identity: [{ name: "contentId", type: "string" }] }, { contentId },
      fetched.data.creator_signature,
    );
    check(signer === wallet.address && fetched.data.creator.wallet === wallet.address, "verifyTypedData gives the creator");
    const forged = await Wallet.createRandom().signTypedData(typed.domain, types, typed.message);
    const refused = await own.POST("/identity/preview", { body: { ...body, signature: forged } });
    check(refused.response.status === 422, `another wallet's signature answered ${refused.response.status}`);
    check(isProblem(refused.error, 422).errors?.signature !== undefined, "the 422 names signature");
  }

  return [
    ["sign_in_with_ethereum", signInWithEthereum],
    ["signed_create", signedCreate],
  ];
}
