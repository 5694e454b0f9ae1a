/** A scripted HTTP server on a free loopback port, standing in for the gateway in the tests. */
import { createServer, IncomingMessage, ServerResponse } from "node:http";
import { AddressInfo } from "node:net";

export type Handler = (req: IncomingMessage, body: Buffer, res: ServerResponse) => void;

/** Serve every request, once its whole body is read, with `handler`. */
export async function serve(handler: Handler): Promise<{ url: string; close: () => Promise<void> }> {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => handler(req, Buffer.concat(chunks), res));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as AddressInfo).port;
  return { url: `http://127.0.0.1:${port}`,
    close: () => new Promise<void>((r) => server.close(() => r())) };
}
