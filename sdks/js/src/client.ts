/**
 * Gateway client: POST /v1/reports with retries, an Idempotency-Key per request, and the
 * device's durable queue (`sendQueued`).
 *
 * Retried: network errors (full-jitter exponential backoff), 429, 502, 503 and 504 — after
 * exactly the Retry-After the gateway states (seconds or an HTTP date) when it is at most
 * `maxWaitMs`, else a GatewayError with `retryAfterMs` at once: never earlier than asked.
 * Never retried: any other status (a 4xx means the message itself is wrong).
 */
import { frameMessages } from "./encode.js";
import { TokenWallet, authorizationHeader, b64url, messageHead, tokenFrames } from "./privacypass.js";
import { randomUuid } from "./random.js";
import { DeviceStore, StoreDocument } from "./store.js";

export interface Accepted {
  accepted_messages: number;
  accepted_reports: number;
}

/** A refusal by the gateway (not retried), or the last error after all retries. */
export class GatewayError extends Error {
  /** For 429/503: how long the gateway asked to wait (ms), else null. */
  readonly retryAfterMs: number | null;
  constructor(message: string, readonly status: number | null,
              readonly body: { detail?: string; reason?: string; index?: number } | null,
              retryAfterMs: number | null = null) {
    super(message);
    this.name = "GatewayError";
    this.retryAfterMs = retryAfterMs;
  }
}

export interface GatewayOptions {
  /** Gateway base URL, e.g. "https://ingest.example.org". */
  url: string;
  /** The fleet's device key (`Authorization: Bearer`). */
  apiKey?: string;
  /** Retries after the first attempt (default 5). */
  maxRetries?: number;
  /** First backoff delay in ms after a network error (default 200), doubled every retry,
   * full jitter. */
  baseDelayMs?: number;
  /** Largest backoff delay in ms (default 30000). */
  maxDelayMs?: number;
  /** Longest Retry-After (ms) the client waits through before retrying (default 60000);
   * a longer one ends the call (sendQueued keeps it in the store). */
  maxWaitMs?: number;
  /** Per-attempt timeout in ms (default 10000). */
  timeoutMs?: number;
  fetch?: typeof fetch;
  sleep?: (ms: number) => Promise<void>;
  /** Jitter source in [0, 1) (default Math.random: jitter needs no CSPRNG). */
  random?: () => number;
  /** Privacy Pass (docs/privacy-pass.md): the token issuer's origin; every report then
   * carries a token, obtained, cached and redeemed here (`sendQueued` posts without). */
  issuerUrl?: string;
  /** The device's persistent secret (required with issuerUrl); the issuer only sees an
   * HMAC of it and counts the quota against it. */
  deviceSecret?: Uint8Array;
  /** Fleet key for the issuer (default: apiKey). */
  issuerKey?: string;
  /** Clock in epoch ms (default Date.now). */
  now?: () => number;
}

/** What `sendQueued` did. */
export interface QueueResult {
  /** Reports the gateway accepted (and the queue forgot). */
  sent: number;
  /** Reports the gateway refused for good (a 4xx): forgotten, and counted in the store. */
  refused: number;
  /** Reports still queued. */
  pending: number;
  /** Reports dropped so far because the queue was full (the store's counter). */
  dropped: number;
  /** Epoch ms before which the gateway asked not to be called, or null. */
  notBefore: number | null;
}

const RETRY_STATUS = new Set([429, 502, 503, 504]);

/** Retry-After (delta seconds or HTTP date) in ms, or null. */
export function retryAfterMs(value: string | null, nowMs: number = Date.now()): number | null {
  if (!value) return null;
  const s = value.trim();
  if (/^\d+(\.\d+)?$/.test(s)) return Math.round(parseFloat(s) * 1000);
  const t = Date.parse(s);
  return Number.isNaN(t) ? null : Math.max(0, t - nowMs);
}

const fromHex = (h: string): Uint8Array =>
  new Uint8Array(h.match(/../g)?.map((x) => parseInt(x, 16)) ?? []);

type Opts = Required<Omit<GatewayOptions, "apiKey" | "issuerUrl" | "deviceSecret" |
  "issuerKey">> & { apiKey?: string };

export class GatewayClient {
  private readonly o: Opts;
  /** The device's Privacy Pass tokens (with `issuerUrl`), else null. */
  readonly wallet: TokenWallet | null;

  constructor(options: GatewayOptions) {
    const { issuerUrl, deviceSecret, issuerKey, ...rest } = options;
    this.o = {
      maxRetries: 5, baseDelayMs: 200, maxDelayMs: 30000, maxWaitMs: 60000, timeoutMs: 10000,
      fetch: (...a) => globalThis.fetch(...a),
      sleep: (ms) => new Promise((r) => setTimeout(r, ms)),
      random: Math.random,
      now: () => Date.now(),
      ...rest,
    };
    if (issuerUrl && !deviceSecret) throw new Error("issuerUrl needs the device's deviceSecret");
    this.wallet = issuerUrl ? new TokenWallet({ url: issuerUrl, deviceSecret: deviceSecret!,
      fleetKey: issuerKey ?? options.apiKey, fetch: this.o.fetch }) : null;
  }

  /** Send one binary message, or several as one `application/x-ldp-frames` body (with
   * tokens: `application/x-ldp-token-frames`, or `Authorization: PrivateToken` for one
   * message of one report). */
  send(messages: Uint8Array | Uint8Array[], idempotencyKey?: string): Promise<Accepted> {
    if (this.wallet) {
      return this.sendTokened(messages instanceof Uint8Array ? [messages] : messages, 0,
        idempotencyKey);
    }
    if (messages instanceof Uint8Array) {
      return this.post("application/octet-stream", messages, idempotencyKey);
    }
    return this.post("application/x-ldp-frames", frameMessages(messages), idempotencyKey);
  }

  /** Send JSON messages (a message text / object, or a list of them); with tokens, each
   * message gets its `tokens`. */
  async sendJson(messages: string | object | Array<string | object>, idempotencyKey?: string
  ): Promise<Accepted> {
    const one = (m: string | object): string => (typeof m === "string" ? m : JSON.stringify(m));
    let list = Array.isArray(messages) ? messages : [messages];
    if (this.wallet) {
      const nowS = this.o.now() / 1000;
      const out: object[] = [];
      for (const m of list) {
        const obj = (typeof m === "string" ? JSON.parse(m) : { ...m }) as
          { collection: string; reports: unknown[]; tokens?: string[] };
        const got = await this.wallet.take(obj.collection, obj.reports.length,
          obj.reports.length, nowS);
        obj.tokens = got.tokens.map((t) => b64url(t));
        out.push(obj);
      }
      list = out;
    }
    const body = Array.isArray(messages) ? `[${list.map(one).join(",")}]` : one(list[0]);
    return this.post("application/json", new TextEncoder().encode(body), idempotencyKey);
  }

  private async sendTokened(messages: Uint8Array[], shift: number, idempotencyKey?: string
  ): Promise<Accepted> {
    const wallet = this.wallet as TokenWallet;
    const nowS = this.o.now() / 1000;
    const items: Array<[Uint8Array[], Uint8Array]> = [];
    let ws = 0;
    for (const m of messages) {
      const head = messageHead(m);
      const key = await wallet.key(head.collection, nowS);
      ws = key.windowSeconds;
      const got = await wallet.take(head.collection, head.reports, head.reports, nowS,
        shift ? key.window + shift * key.windowSeconds : undefined);
      items.push([got.tokens, m]);
    }
    try {
      if (items.length === 1 && items[0][0].length === 1) {
        return await this.post("application/octet-stream", items[0][1], idempotencyKey,
          authorizationHeader(items[0][0][0]));
      }
      return await this.post("application/x-ldp-token-frames", tokenFrames(items),
        idempotencyKey);
    } catch (err) {
      // the gateway's clock puts the reports in the neighbouring window: once, with its tokens
      const reason = err instanceof GatewayError ? err.body?.reason : undefined;
      if (shift === 0 && ws && (reason === "token_window" || reason === "token_key_expired")) {
        return this.sendTokened(messages, reason === "token_key_expired" ? 1 : -1);
      }
      throw err;
    }
  }

  /**
   * Post the reports `Device.enqueue` queued in `store`, oldest first, one request each under
   * the report's own Idempotency-Key. A report leaves the queue only once the gateway
   * accepted it, or refused it for good (4xx: counted in `refused`). Stops at the first
   * network failure or 429/503; a Retry-After longer than `maxWaitMs` is kept in the store,
   * and no request is made before it passes.
   */
  async sendQueued(store: DeviceStore, nowMs: number = Date.now()): Promise<QueueResult> {
    const doc = await store.update((d) => JSON.parse(JSON.stringify(d)) as StoreDocument);
    let sent = 0;
    let refused = 0;
    const notBefore = doc.not_before === null ? null : doc.not_before * 1000;
    if (notBefore === null || nowMs >= notBefore) {
      if (notBefore !== null) await store.update((d) => { d.not_before = null; });
      for (const entry of doc.outbox) {
        try {
          await this.post(entry.type, fromHex(entry.body), entry.key);
        } catch (e) {
          if (!(e instanceof GatewayError)) throw e;
          if (e.status === null || RETRY_STATUS.has(e.status)) {
            if (e.retryAfterMs !== null) {
              const until = (nowMs + e.retryAfterMs) / 1000;
              await store.update((d) => { d.not_before = until; });
            }
            break;
          }
          refused++;
          await store.update((d) => {
            d.outbox = d.outbox.filter((x) => x.key !== entry.key);
            d.refused = (d.refused ?? 0) + 1;
          });
          continue;
        }
        sent++;
        await store.update((d) => { d.outbox = d.outbox.filter((x) => x.key !== entry.key); });
      }
    }
    return store.update((d) => ({ sent, refused, pending: d.outbox.length, dropped: d.dropped,
      notBefore: d.not_before === null ? null : d.not_before * 1000 }));
  }

  /** The delay before retry `attempt` (0-based): full jitter on base * 2^attempt. */
  backoffMs(attempt: number): number {
    const cap = Math.min(this.o.maxDelayMs, this.o.baseDelayMs * 2 ** attempt);
    return Math.floor(this.o.random() * cap);
  }

  /** The headers of one request: the one place they are built. `authorization`: a Privacy
   * Pass `PrivateToken` header (the device key then goes in `x-ldp-key`). */
  headers(contentType: string, idempotencyKey: string, authorization?: string
  ): Record<string, string> {
    const h: Record<string, string> = { "content-type": contentType, accept: "application/json",
      "idempotency-key": idempotencyKey };
    if (authorization) {
      h.authorization = authorization;
      if (this.o.apiKey) h["x-ldp-key"] = this.o.apiKey;
    } else if (this.o.apiKey) {
      h.authorization = `Bearer ${this.o.apiKey}`;
    }
    return h;
  }

  private async post(contentType: string, body: Uint8Array, idempotencyKey?: string,
                     authorization?: string): Promise<Accepted> {
    const url = `${this.o.url.replace(/\/+$/, "")}/v1/reports`;
    const headers = this.headers(contentType, idempotencyKey ?? randomUuid(), authorization);
    let lastError: GatewayError | null = null;
    for (let attempt = 0; attempt <= this.o.maxRetries; attempt++) {
      const ctl = typeof AbortController === "function" ? new AbortController() : null;
      const timer = ctl ? setTimeout(() => ctl.abort(), this.o.timeoutMs) : null;
      let status: number;
      let text: string;
      let retryAfter: string | null;
      try {
        const resp = await this.o.fetch(url, { method: "POST", headers,
          body: body as unknown as BodyInit, signal: ctl?.signal });
        text = await resp.text();
        status = resp.status;
        retryAfter = resp.headers.get("retry-after");
      } catch (err) {
        lastError = new GatewayError(`POST ${url}: ${(err as Error).message}`, null, null);
        if (attempt < this.o.maxRetries) await this.o.sleep(this.backoffMs(attempt));
        continue;
      } finally {
        if (timer) clearTimeout(timer);
      }
      let parsed: unknown = null;
      try { parsed = text ? JSON.parse(text) : null; } catch { parsed = null; }
      if (status >= 200 && status < 300) return parsed as Accepted;
      const detail = parsed as GatewayError["body"];
      const ra = RETRY_STATUS.has(status) ? retryAfterMs(retryAfter) : null;
      lastError = new GatewayError(`POST ${url}: HTTP ${status}` +
        (detail?.detail ? `: ${detail.detail}` : ""), status, detail, ra);
      // Not retryable, or asked to wait longer than we may: the caller decides (never early).
      if (!RETRY_STATUS.has(status) || (ra !== null && ra > this.o.maxWaitMs)) throw lastError;
      if (attempt < this.o.maxRetries) await this.o.sleep(ra ?? this.backoffMs(attempt));
    }
    throw lastError ?? new GatewayError(`POST ${url} failed`, null, null);
  }
}
