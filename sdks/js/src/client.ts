/**
 * Gateway client: POST /v1/reports with retries and exponential backoff.
 *
 * Retried: network errors, 429, 502, 503 and 504 (honouring Retry-After, in seconds or an
 * HTTP date); never retried: any other status (a 4xx means the message itself is wrong).
 */
import { frameMessages } from "./encode.js";
import { TokenWallet, authorizationHeader, b64url, messageHead, tokenFrames } from "./privacypass.js";

export interface Accepted {
  accepted_messages: number;
  accepted_reports: number;
}

/** A refusal by the gateway (not retried), or the last error after all retries. */
export class GatewayError extends Error {
  constructor(message: string, readonly status: number | null,
              readonly body: { detail?: string; reason?: string; index?: number } | null) {
    super(message);
    this.name = "GatewayError";
  }
}

export interface GatewayOptions {
  /** Gateway base URL, e.g. "https://ingest.example.org". */
  url: string;
  apiKey?: string;
  /** Retries after the first attempt (default 5). */
  maxRetries?: number;
  /** First backoff delay in ms (default 200), doubled every retry, full jitter. */
  baseDelayMs?: number;
  /** Largest delay in ms, Retry-After included (default 30000). */
  maxDelayMs?: number;
  /** Per-attempt timeout in ms (default 10000). */
  timeoutMs?: number;
  fetch?: typeof fetch;
  sleep?: (ms: number) => Promise<void>;
  /** Jitter source in [0, 1) (default Math.random: jitter needs no CSPRNG). */
  random?: () => number;
  /** Privacy Pass (docs/privacy-pass.md): the token issuer's origin; every report then
   * carries a token, obtained, cached and redeemed here. */
  issuerUrl?: string;
  /** The device's persistent secret (required with issuerUrl); the issuer only sees an
   * HMAC of it and counts the quota against it. */
  deviceSecret?: Uint8Array;
  /** Fleet key for the issuer (default: apiKey). */
  issuerKey?: string;
  /** Clock in epoch ms (default Date.now). */
  now?: () => number;
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

type Opts = Required<Omit<GatewayOptions, "apiKey" | "issuerUrl" | "deviceSecret" |
  "issuerKey">> & { apiKey?: string };

export class GatewayClient {
  private readonly o: Opts;
  /** The device's Privacy Pass tokens (with `issuerUrl`), else null. */
  readonly wallet: TokenWallet | null;

  constructor(options: GatewayOptions) {
    const { issuerUrl, deviceSecret, issuerKey, ...rest } = options;
    this.o = {
      maxRetries: 5, baseDelayMs: 200, maxDelayMs: 30000, timeoutMs: 10000,
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
  send(messages: Uint8Array | Uint8Array[]): Promise<Accepted> {
    if (this.wallet) return this.sendTokened(messages instanceof Uint8Array ? [messages]
      : messages);
    if (messages instanceof Uint8Array) return this.post("application/octet-stream", messages);
    return this.post("application/x-ldp-frames", frameMessages(messages));
  }

  /** Send JSON messages (a message text / object, or a list of them); with tokens, each
   * message gets its `tokens`. */
  async sendJson(messages: string | object | Array<string | object>): Promise<Accepted> {
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
    const body = Array.isArray(messages) || this.wallet === null
      ? (Array.isArray(messages) ? `[${list.map(one).join(",")}]` : one(messages))
      : one(list[0]);
    return this.post("application/json", new TextEncoder().encode(body));
  }

  private async sendTokened(messages: Uint8Array[], shift = 0): Promise<Accepted> {
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
        return await this.post("application/octet-stream", items[0][1],
          { authorization: authorizationHeader(items[0][0][0]) });
      }
      return await this.post("application/x-ldp-token-frames", tokenFrames(items));
    } catch (err) {
      // the gateway's clock puts the reports in the neighbouring window: once, with its tokens
      const reason = err instanceof GatewayError ? err.body?.reason : undefined;
      if (shift === 0 && ws && (reason === "token_window" || reason === "token_key_expired")) {
        return this.sendTokened(messages, reason === "token_key_expired" ? 1 : -1);
      }
      throw err;
    }
  }

  /** The delay before retry `attempt` (0-based): full jitter on base * 2^attempt. */
  backoffMs(attempt: number): number {
    const cap = Math.min(this.o.maxDelayMs, this.o.baseDelayMs * 2 ** attempt);
    return Math.floor(this.o.random() * cap);
  }

  private async post(contentType: string, body: Uint8Array,
                     extra: Record<string, string> = {}): Promise<Accepted> {
    const url = `${this.o.url.replace(/\/+$/, "")}/v1/reports`;
    const headers: Record<string, string> = { "content-type": contentType,
      accept: "application/json" };
    if (this.o.apiKey) {
      if (extra.authorization) headers["x-ldp-key"] = this.o.apiKey;
      else headers.authorization = `Bearer ${this.o.apiKey}`;
    }
    Object.assign(headers, extra);
    let lastError: GatewayError | null = null;
    for (let attempt = 0; attempt <= this.o.maxRetries; attempt++) {
      let delay: number;
      const ctl = typeof AbortController === "function" ? new AbortController() : null;
      const timer = ctl ? setTimeout(() => ctl.abort(), this.o.timeoutMs) : null;
      try {
        const resp = await this.o.fetch(url, { method: "POST", headers,
          body: body as unknown as BodyInit,
          signal: ctl?.signal });
        const text = await resp.text();
        let parsed: unknown = null;
        try { parsed = text ? JSON.parse(text) : null; } catch { parsed = null; }
        if (resp.status >= 200 && resp.status < 300) return parsed as Accepted;
        const detail = parsed as GatewayError["body"];
        lastError = new GatewayError(`POST ${url}: HTTP ${resp.status}` +
          (detail?.detail ? `: ${detail.detail}` : ""), resp.status, detail);
        if (!RETRY_STATUS.has(resp.status)) throw lastError;
        const ra = retryAfterMs(resp.headers.get("retry-after"));
        delay = ra !== null ? Math.min(ra, this.o.maxDelayMs) : this.backoffMs(attempt);
      } catch (err) {
        if (err instanceof GatewayError && !RETRY_STATUS.has(err.status ?? 0)) throw err;
        if (!(err instanceof GatewayError)) {
          lastError = new GatewayError(`POST ${url}: ${(err as Error).message}`, null, null);
        }
        delay = this.backoffMs(attempt);
      } finally {
        if (timer) clearTimeout(timer);
      }
      if (attempt < this.o.maxRetries) await this.o.sleep(delay);
    }
    throw lastError ?? new GatewayError(`POST ${url} failed`, null, null);
  }
}
