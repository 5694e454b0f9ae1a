/**
 * Gateway client: POST /v1/reports with retries and exponential backoff.
 *
 * Retried: network errors, 429, 502, 503 and 504 (honouring Retry-After, in seconds or an
 * HTTP date); never retried: any other status (a 4xx means the message itself is wrong).
 */
import { frameMessages } from "./encode.js";

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

export class GatewayClient {
  private readonly o: Required<Omit<GatewayOptions, "apiKey">> & { apiKey?: string };

  constructor(options: GatewayOptions) {
    this.o = {
      maxRetries: 5, baseDelayMs: 200, maxDelayMs: 30000, timeoutMs: 10000,
      fetch: (...a) => globalThis.fetch(...a),
      sleep: (ms) => new Promise((r) => setTimeout(r, ms)),
      random: Math.random,
      ...options,
    };
  }

  /** Send one binary message, or several as one `application/x-ldp-frames` body. */
  send(messages: Uint8Array | Uint8Array[]): Promise<Accepted> {
    if (messages instanceof Uint8Array) return this.post("application/octet-stream", messages);
    return this.post("application/x-ldp-frames", frameMessages(messages));
  }

  /** Send JSON messages (a message text / object, or a list of them). */
  sendJson(messages: string | object | Array<string | object>): Promise<Accepted> {
    const one = (m: string | object): string => (typeof m === "string" ? m : JSON.stringify(m));
    const body = Array.isArray(messages) ? `[${messages.map(one).join(",")}]` : one(messages);
    return this.post("application/json", new TextEncoder().encode(body));
  }

  /** The delay before retry `attempt` (0-based): full jitter on base * 2^attempt. */
  backoffMs(attempt: number): number {
    const cap = Math.min(this.o.maxDelayMs, this.o.baseDelayMs * 2 ** attempt);
    return Math.floor(this.o.random() * cap);
  }

  private async post(contentType: string, body: Uint8Array): Promise<Accepted> {
    const url = `${this.o.url.replace(/\/+$/, "")}/v1/reports`;
    const headers: Record<string, string> = { "content-type": contentType,
      accept: "application/json" };
    if (this.o.apiKey) headers.authorization = `Bearer ${this.o.apiKey}`;
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
