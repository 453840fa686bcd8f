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


/** Where a `droppingProxy` cuts a connection: before the message reaches the server, or after the server answered it. */
export interface Drop {
  /** Text the client's message must hold (all of them). */
  holding: string[];
  when: 'before' | 'after';
  /** Run once the message was caught (and, `after`, answered), before the client's connection is dropped. */
  then?: () => Promise<void>;
}

/**
 * A TCP pass-through to PostgreSQL that drops one connection at a chosen
 * message: `before` (the message never reaches the server) or `after` (the
 * server ran it and answered; the answer never reaches the client), as a
 * connection lost during a COMMIT does. One drop per `arm`; `dropped`
 * counts them.
 */
export async function droppingProxy(target: URL): Promise<{ port: number; arm: (drop: Drop) => void; dropped: () => number; close: () => Promise<void> }> {
  const sockets = new Set<net.Socket>();
  let armed: Drop | undefined;
  let dropped = 0;
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => { client.destroy(); upstream.destroy(); });
    }
    let caught: Drop | undefined;
    let dropping = false;
    const drop = () => {
      if (dropping) return;
      dropping = true;
      dropped++;
      void (caught!.then ?? (() => Promise.resolve()))().finally(() => { client.destroy(); upstream.destroy(); });
    };
    client.on('data', (chunk: Buffer) => {
      if (caught) return;
      const text = chunk.toString('latin1');
      if (armed && armed.holding.every((h) => text.includes(h))) {
        caught = armed;
        armed = undefined;
        if (caught.when === 'before') { drop(); return; }
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (!caught) { client.write(chunk); return; }
      // The answer to the caught message ends with ReadyForQuery ('Z', length 5, status).
      if (caught.when === 'after' && chunk.length >= 6 && chunk[chunk.length - 6] === 0x5a) drop();
    });
    client.on('end', () => upstream.end());
    upstream.on('end', () => client.end());
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  return {
    port: (server.address() as net.AddressInfo).port,
    arm: (drop) => { armed = drop; },
    dropped: () => dropped,
    close: () => new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    }),
  };
}
