// Contract wallets on an EVM node (anvil), with viem: deploys them, signs for them, and verifies as viem does:
// the other side of tests/contract_wallets.
//
// argv[2]: the node's JSON-RPC URL. stdin: a JSON list of requests; stdout: a JSON list of answers, in order.
//   {"op": "deploy", "owners": [addresses]}  -> the addresses of a 1-of-1 Safe (owners[0]) and a 2-of-3 Safe
//       (owners[0..2]), of OwnerWallet.sol wallets of owners[0] answering 0x1626ba7e ("wallet") and 0xffffffff
//       ("wrongAnswer"), of a WalletFactory, and of its wallet for owners[0] never deployed ("counterfactual",
//       with the factory call that deploys it: "factory", "factoryData")
//   {"op": "hashMessage", "message"}                          -> {"hash"}  (EIP-191)
//   {"op": "hashTypedData", "typedData"}                      -> {"hash"}  (EIP-712)
//   {"op": "signSafe", "safe", "chainId", "hash", "privateKeys"} -> {"signature"}: the owners' signatures of the
//       Safe's SafeMessage of `hash` (EIP-712, on the Safe's chain), ordered by owner as the Safe requires
//   {"op": "signHash", "privateKey", "hash"}                  -> {"signature"}  (the hash itself, no prefix)
//   {"op": "wrap6492", "factory", "factoryData", "signature"} -> {"signature"}  (EIP-6492's wrapper)
//   {"op": "verifyMessage", "address", "message", "signature"}     -> {"valid"}  (viem's verifyMessage)
//   {"op": "verifyTypedData", "address", "typedData", "signature"} -> {"valid"}  (viem's verifyTypedData)
// A request that fails answers {"error": its message}.

import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import solc from "solc";
import {
  concatHex, createPublicClient, createWalletClient, defineChain, encodeFunctionData, hashMessage, hashTypedData,
  http, keccak256, serializeErc6492Signature, stringToHex, zeroAddress,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";

const require = createRequire(import.meta.url);
const artifact = (path) => require(`@safe-global/safe-contracts/build/artifacts/contracts/${path}`);
const SafeL2 = artifact("SafeL2.sol/SafeL2.json");
const SafeProxyFactory = artifact("proxies/SafeProxyFactory.sol/SafeProxyFactory.json");
const FallbackHandler = artifact("handler/CompatibilityFallbackHandler.sol/CompatibilityFallbackHandler.json");
// anvil's first account (its well-known development key): it pays for the deployments.
const DEPLOYER = privateKeyToAccount("0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80");
const MAGIC = "0x1626ba7e";

const url = process.argv[2];
const transport = http(url);
const publicClient = createPublicClient({ transport });
const chain = defineChain({
  id: await publicClient.getChainId(), name: "anvil", nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
  rpcUrls: { default: { http: [url] } },
});
const client = createPublicClient({ chain, transport });
const wallet = createWalletClient({ account: DEPLOYER, chain, transport });

function compiled() {
  const input = {
    language: "Solidity",
    sources: { "OwnerWallet.sol": { content: readFileSync(new URL("OwnerWallet.sol", import.meta.url), "utf8") } },
    settings: { evmVersion: "cancun", outputSelection: { "*": { "*": ["abi", "evm.bytecode.object"] } } },
  };
  const output = JSON.parse(solc.compile(JSON.stringify(input)));
  const errors = (output.errors ?? []).filter((error) => error.severity === "error");
  if (errors.length) throw new Error(errors.map((error) => error.formattedMessage).join("\n"));
  const contract = (name) => {
    const { abi, evm } = output.contracts["OwnerWallet.sol"][name];
    return { abi, bytecode: `0x${evm.bytecode.object}` };
  };
  return { OwnerWallet: contract("OwnerWallet"), WalletFactory: contract("WalletFactory") };
}

async function deploy({ abi, bytecode }, args = []) {
  const hash = await wallet.deployContract({ abi, bytecode, args });
  const receipt = await client.waitForTransactionReceipt({ hash });
  if (receipt.status !== "success") throw new Error(`deployment failed: ${hash}`);
  return receipt.contractAddress;
}

async function write(address, abi, functionName, args) {
  const { result, request } = await client.simulateContract({ account: DEPLOYER, address, abi, functionName, args });
  const receipt = await client.waitForTransactionReceipt({ hash: await wallet.writeContract(request) });
  if (receipt.status !== "success") throw new Error(`${functionName} failed`);
  return result;
}

async function safe(singleton, factory, handler, owners, threshold, saltNonce) {
  const setup = encodeFunctionData({
    abi: SafeL2.abi, functionName: "setup",
    args: [owners, BigInt(threshold), zeroAddress, "0x", handler, zeroAddress, 0n, zeroAddress],
  });
  return write(factory, SafeProxyFactory.abi, "createProxyWithNonce", [singleton, setup, BigInt(saltNonce)]);
}

async function deployAll({ owners }) {
  const { OwnerWallet, WalletFactory } = compiled();
  const singleton = await deploy(SafeL2);
  const proxyFactory = await deploy(SafeProxyFactory);
  const handler = await deploy(FallbackHandler);
  const salt = keccak256(stringToHex("tests/contract_wallets counterfactual"));
  const factory = await deploy(WalletFactory);
  const counterfactual = await client.readContract({
    address: factory, abi: WalletFactory.abi, functionName: "addressOf", args: [owners[0], salt],
  });
  return {
    chainId: chain.id,
    safe1of1: await safe(singleton, proxyFactory, handler, [owners[0]], 1, 1),
    safe2of3: await safe(singleton, proxyFactory, handler, owners.slice(0, 3), 2, 2),
    wallet: await deploy(OwnerWallet, [owners[0], MAGIC]),
    wrongAnswer: await deploy(OwnerWallet, [owners[0], "0xffffffff"]),
    factory,
    counterfactual,
    factoryData: encodeFunctionData({ abi: WalletFactory.abi, functionName: "deploy", args: [owners[0], salt] }),
  };
}

async function signSafe({ safe, chainId, hash, privateKeys }) {
  const accounts = privateKeys.map((key) => privateKeyToAccount(key));
  accounts.sort((a, b) => (BigInt(a.address) < BigInt(b.address) ? -1 : 1));
  const signatures = [];
  for (const account of accounts) {
    signatures.push(await account.signTypedData({
      domain: { chainId, verifyingContract: safe },
      types: { SafeMessage: [{ name: "message", type: "bytes" }] },
      primaryType: "SafeMessage",
      message: { message: hash },
    }));
  }
  return concatHex(signatures);
}

function withoutDomainType(typedData) {
  const types = { ...typedData.types };
  delete types.EIP712Domain;
  return { ...typedData, types };
}

async function answer(request) {
  switch (request.op) {
    case "deploy":
      return deployAll(request);
    case "hashMessage":
      return { hash: hashMessage(request.message) };
    case "hashTypedData":
      return { hash: hashTypedData(withoutDomainType(request.typedData)) };
    case "signSafe":
      return { signature: await signSafe(request) };
    case "signHash":
      return { signature: await privateKeyToAccount(request.privateKey).sign({ hash: request.hash }) };
    case "wrap6492":
      return { signature: serializeErc6492Signature({ address: request.factory, data: request.factoryData, signature: request.signature }) };
    case "verifyMessage":
      return { valid: await client.verifyMessage({ address: request.address, message: request.message, signature: request.signature }) };
    case "verifyTypedData":
      return { valid: await client.verifyTypedData({ address: request.address, ...withoutDomainType(request.typedData), signature: request.signature }) };
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
