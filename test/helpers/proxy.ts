import net from 'node:net';

/**
 * A TCP pass-through to a server (an engine, PostgreSQL) that the test can cut (refusing
 * connections and dropping those open, as an engine that went down) and
 * bring back on the same port.
 */
export async function cuttableProxy(target: URL): Promise<{ port: number; cut: () => Promise<void>; restore: () => Promise<void>; close: () => Promise<void> }> {
  const sockets = new Set<net.Socket>();
  let server: net.Server | null = null;
  let port = 0;
  const listen = () => new Promise<void>((resolve, reject) => {
    server = net.createServer((client) => {
      const upstream = net.connect(Number(target.port), target.hostname);
      for (const s of [client, upstream]) {
        sockets.add(s);
        s.on('close', () => sockets.delete(s));
        s.on('error', () => { client.destroy(); upstream.destroy(); });
      }
      client.pipe(upstream).pipe(client);
    });
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      port = (server!.address() as net.AddressInfo).port;
      resolve();
    });
  });
  const stop = () => new Promise<void>((resolve) => {
    for (const s of sockets) s.destroy();
    if (!server) { resolve(); return; }
    server.close(() => resolve());
    server = null;
  });
  await listen();
  return { port, cut: stop, restore: listen, close: stop };
}

