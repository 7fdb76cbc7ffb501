#!/usr/bin/env node
'use strict';
/*
 * s3rver (npm, 3.7.1) with the write semantics the broker's S3 storage relies on; same command
 * line as s3rver itself.
 *
 * tansu keeps each partition's high watermark in one object and updates it optimistically: it
 * writes with `If-Match: <etag it last saw>` (or `If-None-Match: *` when it has seen none, as
 * right after a start) and, on 412, reads the object again and retries. It writes each record
 * batch with `If-None-Match: *`. s3rver ignores both headers, so two connections producing to one
 * partition were handed the same offsets, a restarted broker counted offsets from 0 again, and
 * batch objects were overwritten: acknowledged records lost (docs/operations.md).
 *
 * Patched here:
 *  - PUT honours If-Match and If-None-Match (412 PreconditionFailed otherwise), checked and
 *    written under a per-key lock so that no two writes of one key interleave;
 *  - an object is written to a temporary file and renamed into place, so a reader never sees a
 *    partly written object and an upload cut short (client killed mid-request) replaces nothing;
 *  - the etag (the .md5 file beside the object) is removed before the rename and written after
 *    it, and never recomputed into that file by a reader: a reader may see a new object with no
 *    or an old etag (its conditional write then fails and it re-reads), never an etag newer than
 *    the content it read;
 *  - a listing longer than one page (1,000 keys) works. tansu lists every batch object of a
 *    partition on each fetch; s3rver answered such a listing with 500, because its continuation
 *    token is DES-encrypted and Node 17+ (OpenSSL 3) refuses DES, so a partition that had taken
 *    more than 1,000 produce requests could no longer be read from its start. And s3rver walked
 *    the directory in readdir order while paging by key (`start-after`), so even with a token its
 *    pages would skip and repeat keys. Keys are listed in key order here, and the token is the
 *    last key of the page, base64url-encoded.
 */

const crypto = require('crypto');
const fs = require('fs');
const path = require('path');
const { Transform } = require('stream');
const { pipeline } = require('stream/promises');

const FilesystemStore = require('s3rver/lib/stores/filesystem');
const S3Object = require('s3rver/lib/models/object');
const S3Error = require('s3rver/lib/models/error');
const bucketCtrl = require('s3rver/lib/controllers/bucket');
const objectCtrl = require('s3rver/lib/controllers/object');
const { walk } = require('s3rver/lib/utils');

const OBJECT_SUFFIX = '._S3rver_object';

const locks = new Map();

/* Run fn alone for this key: the writes of one key happen one after the other, in arrival order. */
async function withKeyLock(id, fn) {
  const previous = locks.get(id) || Promise.resolve();
  let release;
  const mine = new Promise(resolve => {
    release = resolve;
  });
  const tail = previous.then(() => mine);
  locks.set(id, tail);
  await previous;
  try {
    return await fn();
  } finally {
    release();
    if (locks.get(id) === tail) locks.delete(id);
  }
}

function etagMatches(header, etag) {
  const bare = value => value.trim().replace(/^W\//, '').replace(/^"|"$/g, '');
  return header.split(',').some(v => v.trim() === '*' || bare(v) === bare(etag));
}

async function currentEtag(store, bucket, key) {
  try {
    return (await store.getMetadata(bucket, key)).etag;
  } catch (err) {
    if (err.code === 'ENOENT') return null;
    throw err;
  }
}

async function checkPreconditions(ctx) {
  const ifMatch = ctx.headers['if-match'];
  const ifNoneMatch = ctx.headers['if-none-match'];
  if (!ifMatch && !ifNoneMatch) return;
  const etag = await currentEtag(ctx.store, ctx.params.bucket, ctx.params.key);
  const failed =
    (ifMatch && (etag === null || !etagMatches(ifMatch, etag))) ||
    (ifNoneMatch && etag !== null && etagMatches(ifNoneMatch, etag));
  if (failed) {
    ctx.req.resume(); // let the body drain so the client reads our answer
    throw new S3Error(
      'PreconditionFailed',
      'At least one of the pre-conditions you specified did not hold',
      { Condition: ifMatch ? 'If-Match' : 'If-None-Match' },
    );
  }
}

async function writeAtomically(file, data) {
  const partial = `${file}.partial-${crypto.randomBytes(6).toString('hex')}`;
  try {
    await fs.promises.writeFile(partial, data);
    await fs.promises.rename(partial, file);
  } catch (err) {
    await fs.promises.rm(partial, { force: true });
    throw err;
  }
}

async function md5OfFile(file) {
  const hash = crypto.createHash('md5');
  await pipeline(fs.createReadStream(file), hash);
  return hash.digest('hex');
}

FilesystemStore.prototype.getMetadata = async function getMetadata(bucket, key) {
  const objectPath = this.getResourcePath(bucket, key, 'object');
  const stat = await fs.promises.stat(objectPath); // throws ENOENT when there is no object
  const [stored, md5] = await Promise.all([
    fs.promises
      .readFile(this.getResourcePath(bucket, key, 'metadata.json'))
      .then(JSON.parse)
      .catch(err => {
        if (err.code === 'ENOENT') return undefined;
        throw err;
      }),
    fs.promises
      .readFile(`${objectPath}.md5`, 'utf8')
      .catch(err => {
        if (err.code !== 'ENOENT') throw err;
        return md5OfFile(objectPath); // a write is between its rename and its etag
      }),
  ]);
  return {
    ...stored,
    etag: JSON.stringify(md5),
    'last-modified': stat.mtime.toUTCString(),
    'content-length': stat.size,
  };
};

FilesystemStore.prototype.putObject = async function putObject(object) {
  const objectPath = this.getResourcePath(object.bucket, object.key, 'object');
  await fs.promises.mkdir(path.dirname(objectPath), { recursive: true });
  const partial = `${objectPath}.partial-${crypto.randomBytes(6).toString('hex')}`;
  const hash = crypto.createHash('md5');
  let size = 0;
  try {
    if (Buffer.isBuffer(object.content)) {
      await fs.promises.writeFile(partial, object.content);
      hash.update(object.content);
      size = object.content.length;
    } else {
      const count = new Transform({
        transform(chunk, encoding, callback) {
          hash.update(chunk);
          size += chunk.length;
          callback(null, chunk);
        },
      });
      // pipeline rejects when the request ends early (client gone): nothing is renamed then
      await pipeline(object.content, count, fs.createWriteStream(partial));
    }
  } catch (err) {
    await fs.promises.rm(partial, { force: true });
    throw err;
  }
  const md5 = hash.digest('hex');
  const metadata = {};
  for (const [name, value] of Object.entries(object.metadata)) {
    if (S3Object.ALLOWED_METADATA.includes(name) || name.startsWith('x-amz-meta-')) {
      metadata[name] = value;
    }
  }
  await fs.promises.rm(`${objectPath}.md5`, { force: true });
  await fs.promises.rename(partial, objectPath);
  await writeAtomically(`${objectPath}.md5`, md5);
  await writeAtomically(
    this.getResourcePath(object.bucket, object.key, 'metadata.json'),
    JSON.stringify(metadata, null, 2),
  );
  return { size, md5 };
};

const unconditionalPut = objectCtrl.putObject;
objectCtrl.putObject = async function conditionalPutObject(ctx) {
  return withKeyLock(`${ctx.params.bucket}/${ctx.params.key}`, async () => {
    await checkPreconditions(ctx);
    return unconditionalPut(ctx);
  });
};

/* s3rver's listing, but in key order, as S3 lists and as paging by `start-after` requires. */
FilesystemStore.prototype.listObjects = async function listObjects(bucket, options) {
  const { delimiter = '', startAfter = '', prefix = '', maxKeys = Infinity } = options;
  const bucketPath = this.getBucketPath(bucket);
  const prefixPath = [bucketPath, FilesystemStore.encodeKeyPath(prefix)].join('/');
  const intersectsPrefix = dirPath =>
    dirPath.startsWith(prefixPath) || prefixPath.startsWith(dirPath);
  const keys = [];
  for (const keyPath of walk(bucketPath, intersectsPrefix)) {
    if (!keyPath.endsWith(OBJECT_SUFFIX)) continue;
    const key = FilesystemStore.decodeKeyPath(
      keyPath.slice(bucketPath.length + 1, -OBJECT_SUFFIX.length),
    );
    if (key > startAfter && key.startsWith(prefix)) keys.push(key);
  }
  keys.sort();
  const commonPrefixes = new Set();
  const page = [];
  let isTruncated = false;
  for (const key of keys) {
    const idx = delimiter ? key.slice(prefix.length).indexOf(delimiter) : -1;
    if (idx !== -1) {
      commonPrefixes.add(key.slice(0, prefix.length + idx + 1));
    } else if (page.length < maxKeys) {
      page.push(key);
    } else {
      isTruncated = true;
      break;
    }
  }
  const metadata = await Promise.all(
    page.map(key =>
      this.getMetadata(bucket, key).catch(err => {
        if (err.code === 'ENOENT') return undefined; // deleted since the walk
        throw err;
      }),
    ),
  );
  return {
    objects: page
      .map((key, i) => metadata[i] && new S3Object(bucket, key, null, metadata[i]))
      .filter(Boolean),
    commonPrefixes: [...commonPrefixes].sort(),
    isTruncated,
  };
};

function continuationToken(key) {
  return Buffer.from(key, 'utf8').toString('base64url');
}

/*
 * ListObjectsV2 with our token: s3rver's own is DES-encrypted, and Node 17+ (OpenSSL 3) has no
 * DES, so a listing past one page was a 500. Our token is the page's last key; s3rver's handler
 * lists from `start-after` and answers one page, which we mark truncated with the next token.
 */
const listBucket = bucketCtrl.getBucket;
bucketCtrl.getBucket = async function getBucketPaged(ctx) {
  if (ctx.query['list-type'] !== '2') return listBucket(ctx);
  const { 'continuation-token': token, ...query } = ctx.query;
  if (token !== undefined) {
    const startAfter = Buffer.from(token, 'base64url').toString('utf8');
    if (!token || continuationToken(startAfter) !== token) {
      throw new S3Error('InvalidArgument', 'The continuation token provided is incorrect', {
        ArgumentName: 'continuation-token',
      });
    }
    ctx.query = { ...query, 'start-after': startAfter };
  }
  const store = ctx.store;
  let truncated = false;
  ctx.store = Object.create(store, {
    listObjects: {
      value: async (bucket, options) => {
        const result = await store.listObjects(bucket, options);
        truncated = result.isTruncated;
        return { ...result, isTruncated: false }; // keeps s3rver from making its DES token
      },
    },
  });
  try {
    await listBucket(ctx);
  } finally {
    ctx.store = store;
  }
  const listing = ctx.body.ListBucketResult;
  if (token !== undefined) {
    listing.StartAfter = undefined;
    listing.ContinuationToken = token;
  }
  if (truncated && listing.Contents.length > 0) {
    listing.IsTruncated = true;
    listing.NextContinuationToken = continuationToken(listing.Contents.at(-1).Key);
  }
};

require('s3rver/bin/s3rver.js');
