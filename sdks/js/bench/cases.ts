/** The benchmark collections (the same in the Java SDK's bench). */
const ints = (n: number) => ({ kind: "integers", low: 0, high: n - 1 });
const iv = (bins: number) => ({ kind: "interval", low: 0.0, high: 1.0, bins });

export const BENCH_CASES: Array<[string, Record<string, unknown>]> = [
  ["grr eps=1 d=16", { oracle: { mechanism: "grr", epsilon: 1.0, domain_size: 16 }, domain: ints(16) }],
  ["oue eps=1 d=64", { oracle: { mechanism: "oue", epsilon: 1.0, domain_size: 64 }, domain: ints(64) }],
  ["sue eps=1 d=64", { oracle: { mechanism: "sue", epsilon: 1.0, domain_size: 64 }, domain: ints(64) }],
  ["blh eps=1 d=1024", { oracle: { mechanism: "blh", epsilon: 1.0, domain_size: 1024 }, domain: ints(1024) }],
  ["olh eps=1 d=1024 g=3", { oracle: { mechanism: "olh", epsilon: 1.0, domain_size: 1024, g: 3 }, domain: ints(1024) }],
  ["hr eps=1 d=1024", { oracle: { mechanism: "hr", epsilon: 1.0, domain_size: 1024 }, domain: ints(1024) }],
  ["hrr eps=1 d=1024", { oracle: { mechanism: "hrr", epsilon: 1.0, domain_size: 1024 }, domain: ints(1024) }],
  ["ss eps=1 d=64 k=17", { oracle: { mechanism: "ss", epsilon: 1.0, domain_size: 64, subset_size: 17 }, domain: ints(64) }],
  ["cms eps=2 d=1024 m=37", { oracle: { mechanism: "cms", epsilon: 2.0, domain_size: 1024, m: 37 }, domain: ints(1024) }],
  ["hcms eps=2 d=1024 m=32", { oracle: { mechanism: "hcms", epsilon: 2.0, domain_size: 1024, m: 32 }, domain: ints(1024) }],
  ["hh eps=1 d=1024 B=8 hrr", { oracle: { mechanism: "hh", epsilon: 1.0, domain_size: 1024, fanout: 8, base: "hrr", consistency: true, nonnegative: false }, domain: ints(1024) }],
  ["haar eps=1 d=1024", { oracle: { mechanism: "haar", epsilon: 1.0, domain_size: 1024 }, domain: ints(1024) }],
  ["sw eps=1 bins=64", { oracle: { mechanism: "sw", epsilon: 1.0, domain_size: 64, low: 0.0, high: 1.0, out_bins: 1024, b: 0.25, smoothing: true }, domain: iv(64) }],
  ["pm eps=1 bins=64", { oracle: { mechanism: "pm", epsilon: 1.0, domain_size: 64, low: 0.0, high: 1.0 }, domain: iv(64) }],
  ["duchi eps=1 bins=64", { oracle: { mechanism: "duchi", epsilon: 1.0, domain_size: 64, low: 0.0, high: 1.0 }, domain: iv(64) }],
  ["pem eps=4 bits=32", { oracle: { mechanism: "pem", epsilon: 4.0, bits: 32, keep: 64, eta: 8, pool: 256, hash_seed: 0 }, domain: ints(2 ** 32) }],
  ["ps eps=1 d=64 l=4 grr (3-item sets)", { oracle: { mechanism: "ps", epsilon: 1.0, domain_size: 64, length: 4, inner: "grr" }, domain: ints(64) }],
  ["ps eps=1 d=1024 l=4 olh (3-item sets)", { oracle: { mechanism: "ps", epsilon: 1.0, domain_size: 1024, length: 4, inner: "olh" }, domain: ints(1024) }],
  ["setsize eps=1 d=64 L=8 (3-item sets)", { oracle: { mechanism: "setsize", epsilon: 1.0, domain_size: 64, max_size: 8, inner: "grr" }, domain: ints(64) }],
  ["multi eps=2 k=2: grr16 oue32 pm64", { oracle: { mechanism: "multi", epsilon: 2.0, domain_size: 32768, sample: 2, attributes: [
    { name: "a", mechanism: "grr", domain_size: 16 }, { name: "b", mechanism: "oue", domain_size: 32 },
    { name: "c", mechanism: "pm", domain_size: 64, low: 0.0, high: 1.0 }] },
  domain: { kind: "attributes", attributes: [{ name: "a", ...ints(16) }, { name: "b", ...ints(32) }, { name: "c", ...iv(64) }] } }],
  ["two-level oue eps=4/1 d=64", { oracle: { mechanism: "oue", epsilon: 4.0, domain_size: 64 }, domain: ints(64), memoization: "two-level", epsilon_1: 1.0 }],
].map(([name, c]) => [name as string, { id: "bench", ...(c as object) }]);
