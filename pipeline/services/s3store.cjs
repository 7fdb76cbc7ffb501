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
 *  - listings and metadata come from memory. tansu lists a partition's batch objects on every
 *    fetch, and s3rver walked the directory and read three files per listed key each time: with
 *    ~400 batch objects this process took 18.5 of the 64 CPU-seconds of bench.ingest's
 *    30-second half-load phase, and the cost grew with every produce request. This process is
 *    the only writer of its directory: each bucket's sorted keys are walked once, then kept as
 *    objects are written and deleted; an object's metadata is read once, then kept until a write
 *    of it. A read that overlapped a write of its key is not kept (it may have seen either).
 */

const crypto = require('crypto');
const fs = require('fs');
const path = require('path');
const { Readable, Transform } = require('stream');
const { pipeline } = require('stream/promises');

/*
 * Per request, s3rver did work whose result never differs here (bench/s3store.py measures the
 * store's CPU per request against stock s3rver's): it built an S3Event for every write and
 * emitted it to no listener, and under --silent it still timed and formatted a log line for
 * every request and every controller message. Both are replaced before s3rver's modules load
 * them: an event is built only when something listens, and a silent store logs nothing.
 */
let runningApp; // the S3rver this process serves (set by `run`, below)
const eventPath = require.resolve('s3rver/lib/models/event');
const S3Event = require(eventPath);
const NO_EVENT = Object.freeze({});
require.cache[eventPath].exports = function S3EventIfListened(eventData, reqParams) {
  // called with `new`: the object returned is the one emitted
  if (runningApp && runningApp.listenerCount('event') === 0) return NO_EVENT;
  return new S3Event(eventData, reqParams);
};
const loggerPath = require.resolve('s3rver/lib/middleware/logger');
const loggerMiddleware = require(loggerPath);
require.cache[loggerPath].exports = function quietWhenSilent(app, silent) {
  const middleware = loggerMiddleware(app, silent);
  if (!silent) return middleware;
  for (const level of Object.keys(app.logger.levels)) app.logger[level] = () => app.logger;
  return (ctx, next) => next();
};

const S3rver = require('s3rver');
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
  // a key the bucket's index does not hold, with no write of it running, has no object: a new
  // record batch (`If-None-Match: *`) needs no stat of its missing file
  const index = keyIndex.get(bucket);
  if (index && !index.set.has(key) && !writesRunning.has(cacheId(bucket, key))) return null;
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

function writeAtomically(file, data) {
  const partial = `${file}.partial-${crypto.randomBytes(6).toString('hex')}`;
  try {
    fs.writeFileSync(partial, data);
    fs.renameSync(partial, file);
  } catch (err) {
    fs.rmSync(partial, { force: true });
    throw err;
  }
}

async function md5OfFile(file) {
  const hash = crypto.createHash('md5');
  await pipeline(fs.createReadStream(file), hash);
  return hash.digest('hex');
}

/* Per object (bucket/key): its cached metadata (the first cached dropped first past the cap),
 * the writes of it running, and the reads of it running (each marked when a write begins). */
const METADATA_CACHE_MAX = 100000;
const metadataCache = new Map();
const writesRunning = new Map();
const readsRunning = new Map();
/* Per bucket: its keys in order, as a sorted array and a set; absent until first listed. */
const keyIndex = new Map();
/* Per object: its <Contents> element of a listing, rendered from its cached metadata and dropped
 * with it (a listing renders each object once, not on every fetch). */
const contentsCache = new Map();

const cacheId = (bucket, key) => `${bucket}/${key}`;

/* Keep a value in one of the per-object caches, the first kept dropped first past the cap. */
function keep(cache, id, value) {
  if (cache.size >= METADATA_CACHE_MAX) cache.delete(cache.keys().next().value);
  cache.set(id, value);
}

function sortedInsert(keys, key) {
  let lo = 0;
  let hi = keys.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (keys[mid] < key) lo = mid + 1;
    else hi = mid;
  }
  keys.splice(lo, 0, key);
}

function indexAdd(bucket, key) {
  const index = keyIndex.get(bucket);
  if (index && !index.set.has(key)) {
    index.set.add(key);
    sortedInsert(index.keys, key);
  }
}

function indexRemove(bucket, key) {
  const index = keyIndex.get(bucket);
  if (index && index.set.delete(key)) index.keys.splice(index.keys.indexOf(key), 1);
}

/* Per object: how many writes of it have begun (a write keeps what it wrote in the metadata
 * cache only when no other write of the object began meanwhile). */
const writesBegun = new Map();

/* Run a write of one object: its cached metadata is dropped before and after, a read of it
 * running meanwhile keeps nothing, and `after()` updates the bucket's key index once it is done.
 * `fn` is given the object's metadata as cached before the write (when no other write of it was
 * running, else undefined); when it returns `{ metadata }` and no other write of the object began
 * meanwhile, that metadata is cached (the write knows it: no read of it is needed afterwards). */
async function writing(bucket, key, fn, after) {
  const id = cacheId(bucket, key);
  const previous = writesRunning.has(id) ? undefined : metadataCache.get(id);
  writesRunning.set(id, (writesRunning.get(id) || 0) + 1);
  const begun = (writesBegun.get(id) || 0) + 1;
  writesBegun.set(id, begun);
  for (const read of readsRunning.get(id) || []) read.overlapped = true;
  metadataCache.delete(id);
  contentsCache.delete(id);
  let result;
  let ok = false;
  try {
    result = await fn(previous);
    ok = true;
    return result;
  } finally {
    metadataCache.delete(id);
    contentsCache.delete(id);
    const left = writesRunning.get(id) - 1;
    if (left) writesRunning.set(id, left);
    else writesRunning.delete(id);
    if (writesBegun.get(id) === begun) {
      writesBegun.delete(id);
      if (ok && !left && result && result.metadata) keep(metadataCache, id, result.metadata);
    }
    if (ok) after();
    else keyIndex.delete(bucket); // walked again on the next listing
  }
}

const readMetadata = async function readMetadata(bucket, key) {
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

FilesystemStore.prototype.getMetadata = async function getMetadata(bucket, key) {
  const id = cacheId(bucket, key);
  const cached = metadataCache.get(id);
  if (cached !== undefined) return { ...cached };
  const read = { overlapped: writesRunning.has(id) };
  if (!readsRunning.has(id)) readsRunning.set(id, new Set());
  readsRunning.get(id).add(read);
  let metadata;
  try {
    metadata = await readMetadata.call(this, bucket, key);
  } finally {
    const reads = readsRunning.get(id);
    reads.delete(read);
    if (!reads.size) readsRunning.delete(id);
  }
  if (!read.overlapped) keep(metadataCache, id, metadata);
  return { ...metadata };
};

/* An upload of at most this many bytes with a Content-Length is read whole, then written in one
 * call; a larger or chunked one is streamed to its file. */
const BUFFERED_UPLOAD_MAX = 16 * 1024 * 1024;

/*
 * A GET of a whole object of at most BUFFERED_UPLOAD_MAX bytes reads it in one call and answers
 * the bytes it read. s3rver took the length from the metadata and then streamed the file, so a
 * GET that overlapped a rewrite of its key (a watermark) could answer the new content cut to the
 * old length, or fewer bytes than its Content-Length. When the bytes read are not as long as the
 * metadata says, the metadata is older than they are: the answer's length and etag are theirs.
 * (Bytes as long as the metadata says may still be newer than its etag: the writer's rule, an
 * etag never newer than the content, holds.)
 */
const storeGetObject = FilesystemStore.prototype.getObject;
FilesystemStore.prototype.getObject = async function getObject(bucket, key, options) {
  if (options && (options.start !== undefined || options.end)) {
    return storeGetObject.call(this, bucket, key, options);
  }
  let metadata;
  let content;
  try {
    metadata = await this.getMetadata(bucket, key);
    if (Number(metadata['content-length']) > BUFFERED_UPLOAD_MAX) {
      return storeGetObject.call(this, bucket, key, options);
    }
    content = fs.readFileSync(this.getResourcePath(bucket, key, 'object'));
  } catch (err) {
    if (err.code === 'ENOENT') return null;
    throw err;
  }
  if (content.length !== Number(metadata['content-length'])) {
    metadata['content-length'] = content.length;
    metadata.etag = JSON.stringify(crypto.createHash('md5').update(content).digest('hex'));
  }
  return new S3Object(bucket, key, Readable.from([content]), metadata);
};

async function readUpload(request, declared) {
  const chunks = [];
  let size = 0;
  // rejects when the request ends early (client gone): nothing is renamed then
  for await (const chunk of request) {
    chunks.push(chunk);
    size += chunk.length;
  }
  if (size !== declared) throw new Error(`upload cut short: ${size} of ${declared} bytes`);
  return Buffer.concat(chunks, size);
}

const storedMetadata = object => {
  const metadata = {};
  for (const [name, value] of Object.entries(object.metadata)) {
    if (S3Object.ALLOWED_METADATA.includes(name) || name.startsWith('x-amz-meta-')) {
      metadata[name] = value;
    }
  }
  return metadata;
};

const withoutIntrinsic = ({ etag, 'last-modified': _, 'content-length': __, ...rest }) => rest;

/*
 * The write of an object read whole, in synchronous calls: a watermark or a record batch is a few
 * kilobytes, and each asynchronous call cost more of this process's CPU (a promise, a trip
 * through libuv's thread pool) than the write itself; the event loop waits for the page cache,
 * never for a disk (nothing is fsynced). Both writes end in `publish`.
 */
function putWhole(object, previous, objectPath, content) {
  const partial = `${objectPath}.partial-${crypto.randomBytes(6).toString('hex')}`;
  try {
    try {
      fs.writeFileSync(partial, content);
    } catch (err) {
      if (err.code !== 'ENOENT') throw err;
      fs.mkdirSync(path.dirname(objectPath), { recursive: true });
      fs.writeFileSync(partial, content);
    }
  } catch (err) {
    fs.rmSync(partial, { force: true });
    throw err;
  }
  const md5 = crypto.createHash('md5').update(content).digest('hex');
  return publish.call(this, object, previous, objectPath, partial, md5, content.length);
}

/* Put a written partial file in the object's place: its etag removed before the rename and
 * written after it (a reader never sees an etag newer than the content), then its metadata. */
function publish(object, previous, objectPath, partial, md5, size) {
  const stat = fs.statSync(partial); // the object's mtime once renamed
  const metadata = storedMetadata(object);
  fs.rmSync(`${objectPath}.md5`, { force: true });
  fs.renameSync(partial, objectPath);
  writeAtomically(`${objectPath}.md5`, md5);
  const json = JSON.stringify(metadata, null, 2);
  // a rewrite with the metadata it had (a watermark's) leaves metadata.json as it is
  if (previous === undefined || JSON.stringify(withoutIntrinsic(previous), null, 2) !== json) {
    writeAtomically(this.getResourcePath(object.bucket, object.key, 'metadata.json'), json);
  }
  return written(metadata, md5, size, stat);
}

const written = (metadata, md5, size, stat) => ({
  size,
  md5,
  metadata: {
    ...metadata,
    etag: JSON.stringify(md5),
    'last-modified': stat.mtime.toUTCString(),
    'content-length': size,
  },
});

/* Write an object: read whole and written synchronously when it is small and its length known
 * (`putWhole`), else streamed to its partial file; then `publish`. */
const storePutObject = async function putObject(object, previous) {
  const objectPath = this.getResourcePath(object.bucket, object.key, 'object');
  let content = object.content;
  const declared = Buffer.isBuffer(content) ? content.length
    : Number((content.headers || {})['content-length']);
  if (declared <= BUFFERED_UPLOAD_MAX) {
    if (!Buffer.isBuffer(content)) content = await readUpload(content, declared);
    return putWhole.call(this, object, previous, objectPath, content);
  }
  const partial = `${objectPath}.partial-${crypto.randomBytes(6).toString('hex')}`;
  const hash = crypto.createHash('md5');
  let size = 0;
  try {
    await fs.promises.mkdir(path.dirname(objectPath), { recursive: true });
    const count = new Transform({
      transform(chunk, encoding, callback) {
        hash.update(chunk);
        size += chunk.length;
        callback(null, chunk);
      },
    });
    // pipeline rejects when the request ends early (client gone): nothing is renamed then
    await pipeline(content, count, fs.createWriteStream(partial));
  } catch (err) {
    await fs.promises.rm(partial, { force: true });
    throw err;
  }
  return publish.call(this, object, previous, objectPath, partial, hash.digest('hex'), size);
};

FilesystemStore.prototype.putObject = async function putObject(object) {
  return writing(object.bucket, object.key,
    previous => storePutObject.call(this, object, previous),
    () => indexAdd(object.bucket, object.key));
};

const storeCopyObject = FilesystemStore.prototype.copyObject;
FilesystemStore.prototype.copyObject = async function copyObject(
  srcBucket, srcKey, destBucket, destKey, replacementMetadata) {
  return writing(destBucket, destKey,
    () => storeCopyObject.call(this, srcBucket, srcKey, destBucket, destKey, replacementMetadata),
    () => indexAdd(destBucket, destKey));
};

const storePutMetadata = FilesystemStore.prototype.putMetadata;
FilesystemStore.prototype.putMetadata = async function putMetadata(bucket, key, ...rest) {
  return writing(bucket, key, () => storePutMetadata.call(this, bucket, key, ...rest), () => {});
};

const storeDeleteObject = FilesystemStore.prototype.deleteObject;
FilesystemStore.prototype.deleteObject = async function deleteObject(bucket, key) {
  return writing(bucket, key, () => storeDeleteObject.call(this, bucket, key),
    () => indexRemove(bucket, key));
};

/*
 * A bucket's existence and its configurations (CORS, website): s3rver's middleware read both
 * from disk for every request (a stat of the bucket's directory, two configuration files that
 * do not exist), and only this process changes them. Kept per bucket; a read that overlapped a
 * change of its bucket is not kept (`bucketGeneration` moved).
 */
const bucketCache = new Map(); // bucket -> its S3Bucket (existing buckets only)
const configCache = new Map(); // `${bucket}\n${type}` -> its configuration, or null
const bucketGeneration = new Map();

function bucketChanged(bucket) {
  bucketGeneration.set(bucket, (bucketGeneration.get(bucket) || 0) + 1);
  bucketCache.delete(bucket);
  for (const id of configCache.keys()) if (id.startsWith(`${bucket}\n`)) configCache.delete(id);
}

/* Run a change of the bucket, its cached state dropped before and after. */
async function changingBucket(bucket, fn) {
  bucketChanged(bucket);
  try {
    return await fn();
  } finally {
    bucketChanged(bucket);
  }
}

const storeGetBucket = FilesystemStore.prototype.getBucket;
FilesystemStore.prototype.getBucket = async function getBucket(bucket) {
  if (bucketCache.has(bucket)) return bucketCache.get(bucket);
  const generation = bucketGeneration.get(bucket);
  const found = await storeGetBucket.call(this, bucket);
  // a missing bucket is not kept: it may be a directory made by other means since
  if (found && bucketGeneration.get(bucket) === generation) bucketCache.set(bucket, found);
  return found;
};

const storePutBucket = FilesystemStore.prototype.putBucket;
FilesystemStore.prototype.putBucket = async function putBucket(bucket) {
  return changingBucket(bucket, () => storePutBucket.call(this, bucket));
};

const storeGetSubresource = FilesystemStore.prototype.getSubresource;
FilesystemStore.prototype.getSubresource = async function getSubresource(bucket, key, type) {
  if (key !== undefined) return storeGetSubresource.call(this, bucket, key, type);
  const id = `${bucket}\n${type}`;
  if (configCache.has(id)) return configCache.get(id);
  const generation = bucketGeneration.get(bucket);
  const config = await storeGetSubresource.call(this, bucket, key, type);
  if (bucketGeneration.get(bucket) === generation) configCache.set(id, config);
  return config;
};

for (const method of ['putSubresource', 'deleteSubresource']) {
  const original = FilesystemStore.prototype[method];
  FilesystemStore.prototype[method] = async function changeSubresource(bucket, key, ...rest) {
    if (key !== undefined) return original.call(this, bucket, key, ...rest);
    return changingBucket(bucket, () => original.call(this, bucket, key, ...rest));
  };
}

const storeDeleteBucket = FilesystemStore.prototype.deleteBucket;
FilesystemStore.prototype.deleteBucket = async function deleteBucket(bucket) {
  keyIndex.delete(bucket);
  for (const cache of [metadataCache, contentsCache]) {
    for (const id of cache.keys()) if (id.startsWith(`${bucket}/`)) cache.delete(id);
  }
  return changingBucket(bucket, () => storeDeleteBucket.call(this, bucket));
};

/* The bucket's keys in order: walked once, then kept by the writes above. */
function bucketKeys(store, bucket) {
  let index = keyIndex.get(bucket);
  if (index === undefined) {
    const bucketPath = store.getBucketPath(bucket);
    const keys = [];
    for (const keyPath of walk(bucketPath, () => true)) {
      if (!keyPath.endsWith(OBJECT_SUFFIX)) continue;
      keys.push(FilesystemStore.decodeKeyPath(
        keyPath.slice(bucketPath.length + 1, -OBJECT_SUFFIX.length)));
    }
    keys.sort();
    index = { keys, set: new Set(keys) };
    keyIndex.set(bucket, index);
  }
  return index.keys;
}

const unconditionalPut = objectCtrl.putObject;
objectCtrl.putObject = async function conditionalPutObject(ctx) {
  return withKeyLock(`${ctx.params.bucket}/${ctx.params.key}`, async () => {
    await checkPreconditions(ctx);
    return unconditionalPut(ctx);
  });
};

/* One page of the bucket's keys in key order, as S3 lists and as paging by `start-after`
 * requires: the keys, the common prefixes (with a delimiter), and whether keys were left. */
function listKeys(store, bucket, options) {
  const { delimiter = '', startAfter = '', prefix = '', maxKeys = Infinity } = options;
  const all = bucketKeys(store, bucket);
  // the first key that has the prefix and comes after `start-after`, by binary search (the
  // keys with the prefix are contiguous in the sorted keys)
  let lo = 0;
  let hi = all.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (all[mid] < prefix || all[mid] <= startAfter) lo = mid + 1;
    else hi = mid;
  }
  const keys = [];
  for (let i = lo; i < all.length && all[i].startsWith(prefix); i += 1) {
    if (all[i] > startAfter) keys.push(all[i]);
  }
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
  return { page, commonPrefixes: [...commonPrefixes].sort(), isTruncated };
}

/* s3rver's listing, but in key order (`listKeys`). */
FilesystemStore.prototype.listObjects = async function listObjects(bucket, options) {
  const { page, commonPrefixes, isTruncated } = listKeys(this, bucket, options);
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
    commonPrefixes,
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
const XML_ESCAPES = {
  '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#x27;', '`': '&#x60;',
};
const escapeXml = text => String(text).replace(/[&<>"'`]/g, c => XML_ESCAPES[c]);
const element = (name, value) =>
  (value === undefined ? '' : `<${name}>${escapeXml(value)}</${name}>`);

function renderContents(key, metadata) {
  return `<Contents>${element('Key', key)}` +
    `${element('LastModified', new Date(metadata['last-modified']).toISOString())}` +
    `${element('ETag', metadata.etag)}${element('Size', Number(metadata['content-length']))}` +
    '<StorageClass>STANDARD</StorageClass></Contents>';
}

/* The <Contents> of an object not in `contentsCache`, or undefined when it is gone. Kept only
 * while its metadata is (a write of it drops both), rendered from the cached metadata itself. */
async function readContents(store, bucket, key) {
  const id = cacheId(bucket, key);
  let metadata;
  try {
    metadata = await store.getMetadata(bucket, key);
  } catch (err) {
    if (err.code === 'ENOENT') return undefined; // deleted since the walk
    throw err;
  }
  const cached = metadataCache.get(id);
  if (cached !== undefined && !writesRunning.has(id)) {
    keep(contentsCache, id, renderContents(key, cached));
  }
  return renderContents(key, metadata);
}

/*
 * ListObjectsV2 as tansu asks for it (prefix, and on a long partition continuation tokens),
 * answered with the XML s3rver answers but rendered here: tansu lists a partition's every batch
 * object on each fetch that returns records, and s3rver built an object per key and turned the
 * whole answer into XML each time (7-18 ms of this process per listing of 500-1,000 keys, and
 * growing with the partition; bench/s3listing.py). Anything else (owner, encoding type, a bad
 * max-keys) goes through s3rver's handler below.
 */
async function fastListing(ctx, startAfter, token) {
  const { query } = ctx;
  const bucket = ctx.params.bucket;
  const maxKeys =
    query['max-keys'] === undefined ? 1000 : Math.min(1000, Number(query['max-keys']));
  const prefix = query.prefix || '';
  const delimiter = query.delimiter || undefined;
  const listed = maxKeys === 0
    ? { page: [], commonPrefixes: [], isTruncated: false }
    : listKeys(ctx.store, bucket, { delimiter, startAfter, prefix, maxKeys });
  // the rendered ones as they are, the others read (in parallel) and rendered
  const rendered = listed.page.map(key => contentsCache.get(cacheId(bucket, key)));
  await Promise.all(rendered.map(async (xml, i) => {
    if (xml === undefined) rendered[i] = await readContents(ctx.store, bucket, listed.page[i]);
  }));
  const contents = [];
  rendered.forEach((xml, i) => {
    if (xml !== undefined) contents.push({ key: listed.page[i], xml });
  });
  const truncated = listed.isTruncated && contents.length > 0;
  ctx.type = 'application/xml';
  ctx.body = '<?xml version="1.0" encoding="UTF-8"?>\n' +
    '<ListBucketResult xmlns="http://doc.s3.amazonaws.com/2006-03-01/">' +
    `${element('Name', bucket)}${element('Prefix', prefix)}` +
    `${element('StartAfter', token === undefined ? startAfter : undefined)}` +
    `${element('ContinuationToken', token)}` +
    element('NextContinuationToken',
      truncated ? continuationToken(contents.at(-1).key) : undefined) +
    `${element('KeyCount', contents.length)}${element('MaxKeys', query['max-keys'] || 1000)}` +
    `${element('Delimiter', delimiter)}${element('IsTruncated', truncated)}` +
    contents.map(c => c.xml).join('') +
    listed.commonPrefixes
      .map(p => `<CommonPrefixes>${element('Prefix', p)}</CommonPrefixes>`).join('') +
    '</ListBucketResult>';
}

const fastListable = query =>
  !('marker' in query) && query['fetch-owner'] !== 'true' && query['encoding-type'] === undefined &&
  (query['max-keys'] === undefined || /^\d{1,9}$/.test(query['max-keys']));

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
  if (fastListable(ctx.query)) return fastListing(ctx, ctx.query['start-after'], token);
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

/*
 * The requests tansu sends (an object's GET or PUT, a ListObjectsV2 of a partition, path-style
 * to 127.0.0.1, signed) went through s3rver's whole chain for each: the router matched them
 * against every route, and four middleware ran that do nothing for them (vhost, CORS without a
 * configuration, website for an API request, response-header overrides without such a query).
 * `directRoute`, the first middleware, sends exactly those requests to what the chain would have
 * reached: the same authentication (called for real, so it answers the same errors), the bucket
 * check, and the controller. Anything else (another host, a query, a header that changes what a
 * middleware does, a bucket with a CORS configuration or not yet looked at) goes the whole way.
 */
const authenticate = require('s3rver/lib/middleware/authentication')();
const { isIP } = require('net');
const HOSTNAME = require('os').hostname(); // as vhost reads it, but once

const PLAIN_BUCKET = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;
const PLAIN_KEY = /^[A-Za-z0-9._=-]+(\/[A-Za-z0-9._=-]+)*$/; // nothing to decode, no empty part
const LISTING_PARAMS = new Set(
  ['list-type', 'prefix', 'continuation-token', 'start-after', 'max-keys', 'delimiter']);
const noMore = async () => {};

function directHandler(ctx) {
  const host = ctx.hostname;
  if (!isIP(host) && host !== 'localhost' && host !== HOSTNAME) return undefined;
  const headers = ctx.headers;
  if ('origin' in headers || 'x-amz-website-redirect-location' in headers) return undefined;
  if (!Object.keys(headers).some(name => name.startsWith('x-amz-'))) return undefined;
  const slash = ctx.path.indexOf('/', 1);
  const bucket = ctx.path.slice(1, slash === -1 ? undefined : slash);
  if (!PLAIN_BUCKET.test(bucket) || configCache.get(`${bucket}\ncors`) !== null) return undefined;
  if (slash === -1 || slash === ctx.path.length - 1) { // `/tansu?list-type=2...` (or `/tansu/`)
    const query = ctx.query;
    if (ctx.method !== 'GET' || query['list-type'] !== '2' || !fastListable(query) ||
        !Object.keys(query).every(name => LISTING_PARAMS.has(name))) return undefined;
    return { params: { bucket }, controller: bucketCtrl.getBucket };
  }
  const key = ctx.path.slice(slash + 1);
  if (ctx.querystring !== '' || !PLAIN_KEY.test(key)) return undefined;
  if (ctx.method === 'PUT' && !('x-amz-copy-source' in headers)) {
    return { params: { bucket, key }, controller: objectCtrl.putObject };
  }
  if (ctx.method === 'GET' && !('range' in headers) && !('if-modified-since' in headers)) {
    return { params: { bucket, key }, controller: objectCtrl.getObject };
  }
  return undefined;
}

async function directRoute(ctx, next) {
  const direct = directHandler(ctx);
  if (direct === undefined) return next();
  ctx.params = direct.params;
  ctx.state.vhost = false;
  ctx.state.service = 's3'; // what vhost sets for a request with x-amz-* headers
  await authenticate(ctx, noMore);
  await bucketCtrl.bucketExists(ctx);
  return direct.controller(ctx);
}

const run = S3rver.prototype.run;
S3rver.prototype.run = function runDirect(...args) {
  runningApp = this;
  // the logger is a pass-through only when silent: a logging store takes the whole way
  if (this.silent) this.middleware.unshift(directRoute);
  return run.apply(this, args);
};

require('s3rver/bin/s3rver.js');
