// Signs and verifies as a wallet would, with ethers: the other side of tests/core's wallet proofs.
//
// stdin: a JSON list of requests; stdout: a JSON list of answers, one per request, in order.
//   {"op": "address", "privateKey"}                        -> {"address"}
//   {"op": "signMessage", "privateKey", "message"}          -> {"signature"}  (personal_sign, EIP-191)
//   {"op": "signTypedData", "privateKey", "typedData"}      -> {"signature"}  (eth_signTypedData_v4, EIP-712)
//   {"op": "verifyMessage", "message", "signature"}         -> {"address"}
//   {"op": "verifyTypedData", "typedData", "signature"}     -> {"address"}
//   {"op": "hashTypedData", "typedData"}                    -> {"hash"}
// typedData is the object eth_signTypedData_v4 takes ({types, primaryType, domain, message}), given to ethers
// without EIP712Domain (batch.mjs). A request that ethers refuses answers {"error": its message}.

import { TypedDataEncoder, Wallet, verifyMessage, verifyTypedData } from "ethers";
import { answerEach, withoutDomainType } from "./batch.mjs";

// ethers' arguments for typed data: (domain, types, message).
function ethersArgs(typedData) {
  const { domain, types, message } = withoutDomainType(typedData);
  return [domain, types, message];
}

async function answer(request) {
  switch (request.op) {
    case "address":
      return { address: new Wallet(request.privateKey).address };
    case "signMessage":
      return { signature: await new Wallet(request.privateKey).signMessage(request.message) };
    case "signTypedData":
      return { signature: await new Wallet(request.privateKey).signTypedData(...ethersArgs(request.typedData)) };
    case "verifyMessage":
      return { address: verifyMessage(request.message, request.signature) };
    case "verifyTypedData":
      return { address: verifyTypedData(...ethersArgs(request.typedData), request.signature) };
    case "hashTypedData":
      return { hash: TypedDataEncoder.hash(...ethersArgs(request.typedData)) };
    default:
      throw new Error(`unknown op ${request.op}`);
  }
}

await answerEach(answer);
