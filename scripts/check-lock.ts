/**
 * After `npm install` in CI: the installed tree must be the locked one. Compares the committed
 * package-lock.json (git HEAD) with the one npm left, package by package:
 * - a package in both with another version, source or integrity, or a required (non-optional)
 *   package added or removed: the lock was not honoured, exit 1;
 * - an optional package added or removed (another platform's binary, e.g. @biomejs/cli-darwin-arm64):
 *   allowed, listed. The registry reachable here has carried some of those and not others over
 *   time, and npm writes the lock from what the registry lists; no code on this machine uses them.
 * Then the committed lock is put back, so the clone stays as committed.
 *
 *   node scripts/check-lock.ts
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';

interface Entry {
  version?: string;
  resolved?: string;
  integrity?: string;
  optional?: boolean;
  devOptional?: boolean;
}
type Lock = { packages?: Record<string, Entry> };

const committedText = execFileSync('git', ['show', 'HEAD:package-lock.json'], {
  encoding: 'utf8',
  maxBuffer: 64 << 20,
});
const committed = (JSON.parse(committedText) as Lock).packages ?? {};
const installed = (JSON.parse(readFileSync('package-lock.json', 'utf8')) as Lock).packages ?? {};

const problems: string[] = [];
const optionalChanges: string[] = [];
const isOptional = (e: Entry) => e.optional === true || e.devOptional === true;
for (const name of new Set([...Object.keys(committed), ...Object.keys(installed)])) {
  const a = committed[name];
  const b = installed[name];
  if (a && b) {
    for (const k of ['version', 'resolved', 'integrity'] as const) {
      if (a[k] !== b[k]) problems.push(`${name || '(root)'}: ${k} ${a[k]} in the lock, ${b[k]} installed`);
    }
  } else {
    const e = (a ?? b) as Entry;
    const what = `${name} ${e.version ?? ''} ${a ? 'dropped' : 'added'} by npm install`;
    (isOptional(e) ? optionalChanges : problems).push(what);
  }
}
for (const c of optionalChanges) console.log(`lock: optional package ${c} (allowed)`);
if (problems.length > 0) {
  for (const p of problems) console.error(`lock: ${p}`);
  console.error('package-lock.json was not honoured by npm install: run npm install and commit the lock.');
  process.exit(1);
}
writeFileSync('package-lock.json', committedText);
console.log(`lock: installed as committed (${Object.keys(committed).length} entries)`);
