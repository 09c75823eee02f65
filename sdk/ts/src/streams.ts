/** Stream helpers: NDJSON decoding and body conversion, all incremental (nothing is buffered whole). */

/** Yields each JSON line of body as it arrives. The reader is released (and the body cancelled) when the loop stops early. */
export async function* ndjson(body: ReadableStream<Uint8Array>): AsyncGenerator<Record<string, unknown>> {
  const reader = body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  let finished = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) {
        finished = true;
        break;
      }
      buf += dec.decode(value, { stream: true });
      let nl: number;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl).trim();
        buf = buf.slice(nl + 1);
        if (line) yield JSON.parse(line) as Record<string, unknown>;
      }
    }
    buf += dec.decode();
    if (buf.trim()) yield JSON.parse(buf) as Record<string, unknown>;
  } finally {
    if (!finished) await reader.cancel().catch(() => {});
    reader.releaseLock();
  }
}

/** What a file write accepts. Node's Readable streams are AsyncIterables of Buffers, so they work as they are. */
export type WriteData =
  | string
  | Uint8Array
  | ArrayBuffer
  | Blob
  | ReadableStream<Uint8Array>
  | AsyncIterable<Uint8Array | string>
  | Iterable<Uint8Array>;

/** Turns WriteData into something fetch sends: bytes as they are, iterables as a pulled ReadableStream. */
export function toBody(data: WriteData): string | Uint8Array | ArrayBuffer | Blob | ReadableStream<Uint8Array> {
  if (
    typeof data === "string" ||
    data instanceof Uint8Array ||
    data instanceof ArrayBuffer ||
    data instanceof ReadableStream ||
    (typeof Blob !== "undefined" && data instanceof Blob)
  ) {
    return data;
  }
  const enc = new TextEncoder();
  const it: AsyncIterator<Uint8Array | string> | Iterator<Uint8Array> =
    Symbol.asyncIterator in data
      ? (data as AsyncIterable<Uint8Array | string>)[Symbol.asyncIterator]()
      : (data as Iterable<Uint8Array>)[Symbol.iterator]();
  return new ReadableStream<Uint8Array>({
    async pull(ctrl) {
      const { done, value } = await it.next();
      if (done) ctrl.close();
      else ctrl.enqueue(typeof value === "string" ? enc.encode(value) : new Uint8Array(value.buffer, value.byteOffset, value.byteLength));
    },
    async cancel() {
      await it.return?.();
    },
  });
}

/** Wraps body so that done() runs once when it is read to the end, errors or is cancelled. */
export function onFinish(body: ReadableStream<Uint8Array>, done: () => void): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  let called = false;
  const finish = () => {
    if (!called) {
      called = true;
      done();
    }
  };
  return new ReadableStream<Uint8Array>({
    async pull(ctrl) {
      try {
        const { done: end, value } = await reader.read();
        if (end) {
          finish();
          ctrl.close();
        } else ctrl.enqueue(value);
      } catch (e) {
        finish();
        ctrl.error(e);
      }
    },
    async cancel(reason) {
      finish();
      await reader.cancel(reason);
    },
  });
}
