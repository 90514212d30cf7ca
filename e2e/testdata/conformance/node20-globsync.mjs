// Preload (node --import) for the MCP conformance suite 0.1.16 on Node 20.
//
// The suite's dist/index.js imports globSync from "fs", which Node has
// only from 22 on, so on Node 20 it fails to link before it runs. It calls
// globSync only in its tier-check command (to find checks.json files),
// never in `conformance server`. This preload answers the suite's imports
// of "fs" with Node's fs plus a globSync that throws, so that a use this
// comment did not foresee fails loudly instead of finding nothing. With
// Node 22 or newer it does nothing.
import { register } from 'node:module';
import fs from 'node:fs';

if (!('globSync' in fs)) {
  const shim = `
import fs from 'node:fs';
export * from 'node:fs';
export default fs;
export function globSync() {
  throw new Error('fs.globSync is not in Node ' + process.version + ' (sandbox-run test shim; use Node 22)');
}`;
  const shimURL = 'data:text/javascript,' + encodeURIComponent(shim);
  const hooks = `
export async function resolve(specifier, context, next) {
  if ((specifier === 'fs' || specifier === 'node:fs') && context.parentURL && !context.parentURL.startsWith('data:')) {
    return { url: ${JSON.stringify(shimURL)}, shortCircuit: true };
  }
  return next(specifier, context);
}`;
  register('data:text/javascript,' + encodeURIComponent(hooks));
}
