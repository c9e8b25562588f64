// Signs and verifies as a wallet would, with ethers: the other side of tests/core's wallet proofs.
//
// stdin: a JSON list of requests; stdout: a JSON list of answers, one per request, in order.
//   {"op": "address", "privateKey"}                        -> {"address"}
//   {"op": "signMessage", "privateKey", "message"}          -> {"signature"}  (personal_sign, EIP-191)
//   {"op": "signTypedData", "privateKey", "typedData"}      -> {"signature"}  (eth_signTypedData_v4, EIP-712)
//   {"op": "verifyMessage", "message", "signature"}         -> {"address"}
//   {"op": "verifyTypedData", "typedData", "signature"}     -> {"address"}
//   {"op": "hashTypedData", "typedData"}                    -> {"hash"}
// typedData is the object eth_signTypedData_v4 takes ({types, primaryType, domain, message}); ethers
// derives EIP712Domain from the domain's fields itself, so it is left out of the types it is given, as
// a dapp calling ethers does. A request that ethers refuses answers {"error": its message}.

import { TypedDataEncoder, Wallet, verifyMessage, verifyTypedData } from "ethers";

function withoutDomainType(typedData) {
  const types = { ...typedData.types };
  delete types.EIP712Domain;
  return [typedData.domain, types, typedData.message];
}

async function answer(request) {
  switch (request.op) {
    case "address":
      return { address: new Wallet(request.privateKey).address };
    case "signMessage":
      return { signature: await new Wallet(request.privateKey).signMessage(request.message) };
    case "signTypedData":
      return { signature: await new Wallet(request.privateKey).signTypedData(...withoutDomainType(request.typedData)) };
    case "verifyMessage":
      return { address: verifyMessage(request.message, request.signature) };
    case "verifyTypedData":
      return { address: verifyTypedData(...withoutDomainType(request.typedData), request.signature) };
    case "hashTypedData":
      return { hash: TypedDataEncoder.hash(...withoutDomainType(request.typedData)) };
    default:
      throw new Error(`unknown op ${request.op}`);
  }
}

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const answers = [];
for (const request of JSON.parse(Buffer.concat(chunks).toString("utf8"))) {
  try {
    answers.push(await answer(request));
  } catch (error) {
    answers.push({ error: error.shortMessage ?? error.message });
  }
}
process.stdout.write(JSON.stringify(answers));
