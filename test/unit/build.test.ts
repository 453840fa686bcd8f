import { expect } from 'chai';
import { existsSync, mkdirSync, readFileSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { buildService } from '../../scripts/build.js';
import { removeDir, tempDir } from '../helpers/server.js';

describe('npm run build (scripts/build.ts)', function () {
  this.timeout(60_000);
  let out: string;
  beforeEach(() => { out = path.join(tempDir(), 'dist'); });
  afterEach(() => removeDir(path.dirname(out)));

  it('compiles every module, then writes nothing while the sources are unchanged', async () => {
    const first = await buildService(out);
    expect(first.written).to.be.greaterThan(first.modules); // a module and its source map
    expect(readFileSync(path.join(out, 'cli.js'), 'utf8')).to.include('sourceMappingURL=cli.js.map');
    expect(existsSync(path.join(out, 'store', 'embedded', 'oxigraph-store.js'))).to.equal(true);
    // An up-to-date tree is not written (a read-only dist/ still starts): no file's time moves.
    const cli = path.join(out, 'cli.js');
    utimesSync(cli, new Date(0), new Date(0));
    const again = await buildService(out);
    expect(again.written).to.equal(0);
    expect(statSync(cli).mtimeMs).to.equal(0);
  });

  it('rewrites a file that differs, removes files no module compiles to and temporary files of builds that died', async () => {
    await buildService(out);
    const cli = path.join(out, 'cli.js');
    const compiled = readFileSync(cli, 'utf8');
    writeFileSync(cli, '// damaged\n');
    mkdirSync(path.join(out, 'gone'), { recursive: true });
    writeFileSync(path.join(out, 'gone', 'old.js'), 'export {};\n');
    // A pid far above Linux's default pid_max (4,194,304 at most): no process has it.
    writeFileSync(path.join(out, 'app.js.tmp-99999999'), 'half a file');
    // The temporary file of a build still running (this process) is left to it.
    writeFileSync(path.join(out, `app.js.tmp-${process.pid}`), 'being written');
    const result = await buildService(out);
    expect(result.written).to.equal(1);
    expect(readFileSync(cli, 'utf8')).to.equal(compiled);
    expect(existsSync(path.join(out, 'gone', 'old.js'))).to.equal(false);
    expect(existsSync(path.join(out, 'app.js.tmp-99999999'))).to.equal(false);
    expect(existsSync(path.join(out, `app.js.tmp-${process.pid}`))).to.equal(true);
  });
});
