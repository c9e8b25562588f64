// What sign.mjs and chain.mjs share: their way in (a JSON list of requests on stdin, a JSON list of answers, one
// per request and in order, on stdout; a request that fails answers {"error": its message}), and typed data as a
// library takes it.

// Answers each request of stdin's list with `await answer(request)` and writes the answers to stdout.
export async function answerEach(answer) {
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
}

// eth_signTypedData_v4's object without EIP712Domain in its types: ethers and viem derive it from the domain's
// fields themselves, so it is left out of the types they are given, as a dapp calling them does.
export function withoutDomainType(typedData) {
  const types = { ...typedData.types };
  delete types.EIP712Domain;
  return { ...typedData, types };
}
