// Builds the portal into dist/ (committed, embedded in the server binary at compile time) and
// records in dist/SOURCES.sha256 the digest of the sources it was built from, which a Rust test
// recomputes so that stale assets fail the build's tests. Run: npm ci && npm run build.
import { createHash } from 'node:crypto';
import { copyFileSync, mkdirSync, readFileSync, readdirSync, renameSync, writeFileSync } from 'node:fs';
import { build } from 'esbuild';

const here = new URL('.', import.meta.url).pathname;
mkdirSync(`${here}dist`, { recursive: true });

await build({
  entryPoints: { portal: `${here}src/main.js` },
  bundle: true,
  format: 'esm',
  minify: true,
  legalComments: 'external',
  target: ['chrome110', 'firefox110', 'safari16'],
  outdir: `${here}dist`,
  logLevel: 'warning',
});
await build({
  entryPoints: { portal: `${here}src/portal.css` },
  bundle: true,
  minify: true,
  outdir: `${here}dist`,
  logLevel: 'warning',
});
copyFileSync(`${here}src/index.html`, `${here}dist/index.html`);
// The licenses of the bundled libraries, under a name the server can serve (lower case).
renameSync(`${here}dist/portal.js.LEGAL.txt`, `${here}dist/licenses.txt`);

// The digest: for each source file in byte order of its path, "path\nlength\n" then its bytes.
function sourceFiles() {
  const src = readdirSync(`${here}src`).map((f) => `src/${f}`);
  return ['build.mjs', 'package.json', 'package-lock.json', ...src].sort();
}
const hash = createHash('sha256');
for (const f of sourceFiles()) {
  const bytes = readFileSync(`${here}${f}`);
  hash.update(`${f}\n${bytes.length}\n`);
  hash.update(bytes);
}
writeFileSync(`${here}dist/SOURCES.sha256`, `${hash.digest('hex')}\n`);
