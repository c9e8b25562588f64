// Reads a CAR file with @ipld/car, and checks it as tests/data/test_snapshot.py asks: prints one JSON object.
//   node check.mjs PATH.car
import fs from 'node:fs'
import { CarReader } from '@ipld/car'
import * as dagCbor from '@ipld/dag-cbor'
import { sha256 } from 'multiformats/hashes/sha2'
import { CID } from 'multiformats/cid'

const RAW = 0x55
const reader = await CarReader.fromBytes(fs.readFileSync(process.argv[2]))
const roots = await reader.getRoots()
const blocks = new Map()
let badHashes = 0
let largest = 0
for await (const { cid, bytes } of reader.blocks()) {
  const digest = await sha256.digest(bytes)
  if (cid.multihash.code !== sha256.code || !equal(digest.digest, cid.multihash.digest)) badHashes++
  largest = Math.max(largest, bytes.length)
  blocks.set(cid.toString(), { cid, bytes })
}
// Walk from the root: every link of a DAG-CBOR block, down to the raw blocks.
const reached = new Set()
const missing = []
const stack = roots.map((root) => root.toString())
while (stack.length) {
  const key = stack.pop()
  if (reached.has(key)) continue
  reached.add(key)
  const block = blocks.get(key)
  if (!block) { missing.push(key); continue }
  if (block.cid.code === dagCbor.code) {
    for (const link of dagCbor.decode(block.bytes)) {
      const cid = CID.asCID(link)
      if (!cid) throw new Error(`index block ${key} holds a value that is not a link`)
      stack.push(cid.toString())
    }
  }
}
const raw = [...blocks.values()].filter(({ cid }) => cid.code === RAW)
console.log(JSON.stringify({
  roots: roots.map((root) => root.toString()),
  blocks: blocks.size,
  badHashes,
  largest,
  missing,
  unreached: [...blocks.keys()].filter((key) => !reached.has(key)),
  raw: Object.fromEntries(raw.map(({ cid, bytes }) => [cid.toString(), Buffer.from(bytes).toString('utf8')])),
}))

function equal (a, b) {
  return a.length === b.length && a.every((byte, i) => byte === b[i])
}
