/* node entry of tests/test_wasm.py: runs runner.js's cases against the wasm build in node.
 *
 *   node tests/web/node_run.mjs BUILD_DIR FIXTURE_DIR   (FIXTURE_DIR/spec.json and its bundles)
 *
 * Prints the results as one JSON document on stdout. */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { runAll } from './runner.js';

const [buildDir, fixtureDir] = process.argv.slice(2);
const api = await import(pathToFileURL(path.join(buildDir, 'ldptext-web.js')).href);
const spec = JSON.parse(await readFile(path.join(fixtureDir, 'spec.json'), 'utf8'));
const load = async (name) => new Uint8Array(await readFile(path.join(fixtureDir, name)));
const results = await runAll(api, spec, load);
process.stdout.write(JSON.stringify(results));
