import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Ajv } from 'ajv';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';

/**
 * docker-compose.yml, checked two ways: everywhere against the Compose Specification's JSON
 * schema (test/compose/compose-spec.json, copied from github.com/compose-spec/compose-spec,
 * schema/compose-spec.json, commit 170098b, Apache-2.0) plus the project's own expectations; and,
 * where a Docker Compose v2 client exists, with `docker compose config` itself.
 */

const root = path.resolve(import.meta.dirname, '..', '..');
const composeFile = path.join(root, 'docker-compose.yml');
const text = readFileSync(composeFile, 'utf8');

interface Service {
  image?: string;
  build?: unknown;
  profiles?: string[];
  depends_on?: Record<string, { condition: string; required?: boolean }>;
  ports?: string[];
  command?: unknown;
  environment?: Record<string, string>;
}
const doc = parse(text, { merge: true }) as { services: Record<string, Service> };
const services = doc.services;

function composeAvailable(): boolean {
  const r = spawnSync('docker', ['compose', 'version'], { encoding: 'utf8' });
  return r.status === 0;
}
const hasCompose = composeAvailable();

describe('docker-compose.yml', () => {
  it('when validated against the Compose Specification schema, then it has no errors', () => {
    const schema = JSON.parse(readFileSync(path.join(import.meta.dirname, 'compose-spec.json'), 'utf8'));
    // The schema names its meta-schema by an https address ajv does not know (it is draft-07).
    delete schema.$schema;
    const ajv = new Ajv({ allErrors: true, strict: false, validateFormats: false });
    const validate = ajv.compile(schema);
    const ok = validate(parse(text, { merge: true }));
    expect(validate.errors ?? []).toEqual([]);
    expect(ok).toBe(true);
  });

  it('when read, then it has postgres, Temporal with schema setup and UI, migrate and the worker, and the simulator only under the profile sim', () => {
    expect(Object.keys(services).sort()).toEqual(
      [
        'dashboard',
        'migrate',
        'postgres',
        'simulator',
        'temporal',
        'temporal-namespace',
        'temporal-schema',
        'temporal-ui',
        'worker',
      ].sort(),
    );
    expect(services.simulator?.profiles).toEqual(['sim']);
    for (const [name, s] of Object.entries(services)) {
      if (name !== 'simulator') expect(s.profiles, name).toBeUndefined();
    }
    expect(services.postgres?.image).toMatch(/^postgres:1[78]/);
    expect(services.temporal?.image).toMatch(/^temporalio\/server:/);
    expect(services['temporal-schema']?.image).toMatch(/^temporalio\/admin-tools:/);
    expect(services['temporal-ui']?.image).toMatch(/^temporalio\/ui:/);
    expect(text).not.toMatch(/auto-setup:/);
  });

  it('when the worker starts, then it waits for the migrations and the namespace, and for the simulator only when that profile runs', () => {
    const deps = services.worker?.depends_on ?? {};
    expect(deps.migrate?.condition).toBe('service_completed_successfully');
    expect(deps['temporal-namespace']?.condition).toBe('service_completed_successfully');
    expect(deps.simulator).toMatchObject({ condition: 'service_healthy', required: false });
    expect(services.worker?.build).toBe('.');
    expect(services.worker?.environment?.TEMPORAL_ADDRESS).toBe('temporal:7233');
    expect(services.worker?.environment?.DATABASE_URL).toMatch(/@postgres:5432\/crs$/);
    expect(JSON.stringify(services.worker?.command)).toContain('bin/crs-sync.js worker');
    expect(services.migrate?.command).toEqual(['node', 'bin/crs-sync.js', 'migrate']);
    expect(((services.simulator?.command ?? []) as string[]).slice(0, 3)).toEqual([
      'node',
      'bin/crs-sync.js',
      'sim',
    ]);
  });

  it('when the dashboard starts, then it waits for the migrations and serves the CLI dashboard on 8787', () => {
    const d = services.dashboard;
    expect(d?.depends_on?.migrate?.condition).toBe('service_completed_successfully');
    expect(JSON.stringify(d?.command)).toBe(
      JSON.stringify('node bin/crs-sync.js dashboard --host 0.0.0.0 --port 8787'.split(' ')),
    );
    expect(d?.environment?.DATABASE_URL).toMatch(/@postgres:5432\/crs$/);
    expect(d?.ports).toHaveLength(1);
    expect(d?.ports?.[0]).toMatch(/^127\.0\.0\.1:\$\{DASHBOARD_PORT:-8787\}:8787$/);
  });

  it('when a port is published, then it binds to 127.0.0.1 only', () => {
    const ports = Object.values(services).flatMap((s) => s.ports ?? []);
    expect(ports.length).toBeGreaterThan(0);
    for (const p of ports) expect(p).toMatch(/^127\.0\.0\.1:/);
  });

  it('when no .env exists, then every variable it interpolates has a default', () => {
    // `$$` is a literal dollar for the container's shell, not interpolation.
    const refs = [...text.replaceAll('$$', '').matchAll(/\$\{([^}]+)\}/g)].map((m) => m[1]!);
    expect(refs.length).toBeGreaterThan(0);
    for (const r of refs) expect(r, r).toMatch(/^[A-Z_][A-Z0-9_]*:-./);
  });

  it('when the image is built, then the Dockerfile copies what the CLI needs from node:24 and .dockerignore keeps it', () => {
    const dockerfile = readFileSync(path.join(root, 'Dockerfile'), 'utf8');
    expect(dockerfile).toMatch(/^FROM node:24/m);
    expect(dockerfile).toMatch(/npm ci --omit=dev/);
    const copied = [...dockerfile.matchAll(/^COPY (\S+)/gm)].map((m) => m[1]!);
    const ignored = readFileSync(path.join(root, '.dockerignore'), 'utf8')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith('#'));
    for (const c of copied) {
      expect(existsSync(path.join(root, c)), c).toBe(true);
      expect(ignored, c).not.toContain(c);
    }
    for (const needed of ['bin', 'src', 'workflows', 'activities', 'contract', 'migrations']) {
      expect(copied).toContain(needed);
    }
    expect(ignored).toEqual(expect.arrayContaining(['node_modules', '.env', '.data', '.git']));
  });

  it.skipIf(!hasCompose)(
    'when `docker compose config` reads it (skipped: no Docker Compose v2 client on this machine), then it is valid with and without the sim profile',
    () => {
      const opts = { cwd: root, encoding: 'utf8' as const, env: { ...process.env, COMPOSE_PROFILES: '' } };
      execFileSync('docker', ['compose', '-f', composeFile, 'config', '-q'], opts);
      const plain = execFileSync('docker', ['compose', '-f', composeFile, 'config', '--services'], opts);
      expect(plain.split('\n').filter(Boolean)).not.toContain('simulator');
      const withSim = execFileSync(
        'docker',
        ['compose', '-f', composeFile, '--profile', 'sim', 'config', '--services'],
        opts,
      );
      expect(withSim.split('\n').filter(Boolean)).toEqual(expect.arrayContaining(['simulator', 'worker']));
    },
  );
});
