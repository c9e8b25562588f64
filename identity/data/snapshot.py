"""`flask identities snapshot PATH.car`: every identity's content in one CARv1 file for IPFS, under one root.

The file (https://ipld.io/specs/transport/car/carv1/) holds:

- one raw block per identity: its canonical content, whose CID (v1, raw, sha2-256) is the
  identity's content_id, so `ipfs cat <content_id>` prints it once the file is imported;
- index blocks, in DAG-CBOR: each a list of up to FANOUT links, in content_id order. The first level
  links the raw blocks, each next level the index blocks below it, up to a single root, which the
  header names. With no more than FANOUT identities the root links the raw blocks directly; with none,
  the root is the empty list.

The root depends only on the set of identities: they are read in content_id order and the tree's
shape follows from their number. Each content is hashed again here and must match its stored id.

DAG-CBOR's canonical form of a list of links and of the header map is exactly canonical CBOR with tag
42 (a link: a zero byte, then the CID's bytes), which cbor2 writes in C, many times faster than a pure
Python DAG-CBOR encoder at a million links; tests/data/test_snapshot.py reads the file back with @ipld/car
and its strict DAG-CBOR decoder. multiformats writes the varints and the root's text form.
"""

import hashlib

import cbor2
from multiformats import CID, varint
from sqlalchemy import select

from ..core import content
from ..storage.database import db
from ..storage.models import Identity

# Links per index block: 1,024 links of 41 bytes make blocks of about 42 KB, far below the 1 MiB that
# IPFS accepts for a block, and two levels hold a million identities.
FANOUT = 1024
# CIDv1 prefixes (version, codec, multihash sha2-256 of 32 bytes): raw 0x55 and dag-cbor 0x71.
RAW_PREFIX = bytes([0x01, 0x55, 0x12, 0x20])
DAG_CBOR_PREFIX = bytes([0x01, 0x71, 0x12, 0x20])
LINK_TAG = 42
READ_BATCH = 2000  # rows per round trip: memory holds one batch, whatever the total

_CONTENTS = select(Identity.content_id, *(getattr(Identity, name) for name in content.CONTENT_FIELDS)).order_by(
    Identity.content_id
)


class SnapshotError(Exception):
    """A stored identity whose content no longer hashes to its content_id: the database is damaged."""


def link(cid):
    """A DAG-CBOR link to the CID given as bytes."""
    return cbor2.CBORTag(LINK_TAG, b"\x00" + cid)


def encode(value):
    """`value` (lists, maps of text keys, links, ints, text) in DAG-CBOR's canonical form."""
    return cbor2.dumps(value, canonical=True)


def header(root):
    """The CARv1 header naming `root` (CID bytes)."""
    return encode({"roots": [link(root)], "version": 1})


def section(cid, data):
    """One CAR block: varint length, CID bytes, data."""
    return varint.encode(len(cid) + len(data)) + cid + data


class _Writer:
    """Writes blocks to a CAR stream, and builds index blocks FANOUT links at a time."""

    def __init__(self, stream):
        self.stream = stream
        self.leaves = []  # raw CIDs not yet in an index block
        self.level = []  # CIDs of the first level of index blocks

    def block(self, prefix, data):
        cid = prefix + hashlib.sha256(data).digest()
        self.stream.write(section(cid, data))
        return cid

    def index(self, cids):
        return self.block(DAG_CBOR_PREFIX, encode([link(cid) for cid in cids]))

    def identity(self, data):
        self.leaves.append(self.block(RAW_PREFIX, data))
        if len(self.leaves) == FANOUT:
            self.level.append(self.index(self.leaves))
            self.leaves = []

    def root(self):
        """The root CID (bytes), once every identity was written."""
        if not self.level:
            return self.index(self.leaves)  # FANOUT identities or fewer: one block links them all
        if self.leaves:
            self.level.append(self.index(self.leaves))
        level = self.level
        while len(level) > 1:
            level = [self.index(level[start : start + FANOUT]) for start in range(0, len(level), FANOUT)]
        return level[0]


def write_snapshot(stream, progress=None):
    """Write every identity as a CARv1 file to the seekable binary `stream`; returns (root CID, count).

    The header, which names the root, is written first with a placeholder of the same length and
    rewritten at the end, so the identities are read once, in content_id order, in batches.
    """
    placeholder = header(DAG_CBOR_PREFIX + bytes(32))
    stream.write(varint.encode(len(placeholder)) + placeholder)
    writer = _Writer(stream)
    count = 0
    try:
        result = db.session.execute(_CONTENTS.execution_options(yield_per=READ_BATCH))
        for rows in result.partitions():
            for content_id, *values in rows:
                data = content.canonical_bytes(
                    {name: value for name, value in zip(content.CONTENT_FIELDS, values, strict=True) if value is not None}
                )
                if content.content_id_of(data) != content_id:
                    raise SnapshotError(f"The content of identity {content_id} no longer hashes to its id: the "
                                        "database was altered outside the service; restore it from a backup.")
                writer.identity(data)
            count += len(rows)
            if progress:
                progress(len(rows))
    finally:
        db.session.rollback()  # a read only
    root = writer.root()
    stream.seek(0)
    stream.write(varint.encode(len(placeholder)) + header(root))
    return CID.decode(root).encode("base32"), count
