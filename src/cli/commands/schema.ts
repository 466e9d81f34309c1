import type { Command } from 'commander';
import { DRIFT_SOURCES, type DriftSource } from '../../common/schema-drift.ts';
import { CrsError } from '../../errors.ts';
import { listSchemaDrift, queryable, type SchemaDrift } from '../../warehouse/read/index.ts';
import { acceptSchemaDrift } from '../../warehouse/schema-drift.ts';
import { loadContext, openConfiguredWarehouse } from '../context.ts';
import { printRows } from '../output.ts';

function parseSource(v: string | undefined, what: string): DriftSource {
  if (v === undefined || !(DRIFT_SOURCES as readonly string[]).includes(v)) {
    throw new CrsError(
      'USAGE',
      `${what} must be one of ${DRIFT_SOURCES.join(', ')}${v ? `, not "${v}"` : ''}`,
    );
  }
  return v as DriftSource;
}

/** A drift as `schema changes --json` prints it: snake_case, times in ISO 8601. */
function driftJson(d: SchemaDrift): Record<string, unknown> {
  return {
    source: d.source,
    path: d.path,
    kind: d.kind,
    expected_type: d.expectedType,
    actual_type: d.actualType,
    example: d.example,
    first_day: d.firstDay,
    first_seen_at: d.firstSeenAt.toISOString(),
    last_seen_at: d.lastSeenAt.toISOString(),
    count: d.count,
    accepted_at: d.acceptedAt?.toISOString() ?? null,
  };
}

/** `crs-sync schema changes|accept`. Long: one commander definition of two subcommands, each with its help and output. */
export function registerSchema(program: Command): void {
  const schema = program
    .command('schema')
    .summary('schema drift: what the service sends that the contract does not know')
    .description(
      'Every export line and every thread-list entry, history entry and artifact is compared with\n' +
        'the contract crs-sync knows (docs/service-contract.md). A field the contract does not name\n' +
        '(new_field), a field it expects that is absent (missing_field) or a field of another JSON\n' +
        'type (type_changed) is recorded once per source, path and kind, with the first day, how\n' +
        'many records carried it and a short example (credentials masked). A record quarantined\n' +
        'for another reason than its drift (rejects list) records none.\n\n' +
        'CRS_RECORD_CONTRACT=evolve (the default) loads such export records, history entries and\n' +
        'artifacts as before; =freeze quarantines them with the code schema_drift (thread-list\n' +
        'entries are only recorded). `accept` widens the contract by a field; `crs-sync rejects\n' +
        'replay --code schema_drift` then loads what freeze held back (entries and artifacts: their\n' +
        'threads are enriched again).',
    );

  schema
    .command('changes')
    .description('list the drift recorded, oldest first (accepted drift marked, or left out with --open)')
    .option('--json', 'print JSON lines, one drift per line')
    .option('--source <source>', `only this source (${DRIFT_SOURCES.join(', ')})`)
    .option('--open', 'only drift not accepted yet')
    .addHelpText(
      'after',
      '\nExamples:\n' +
        '  crs-sync schema changes                      every drift, in a table\n' +
        '  crs-sync schema changes --open --json        what still needs a decision, for a script\n\n' +
        'count: export lines (a day loaded twice counts once) or thread-API entities that carried it.',
    )
    .action(async (o: { json?: boolean; source?: string; open?: boolean }) => {
      const source = o.source === undefined ? undefined : parseSource(o.source, '--source');
      const ctx = loadContext();
      const wh = await openConfiguredWarehouse(ctx, { connections: 1, schema: 'current' });
      try {
        const rows = await listSchemaDrift(queryable(wh.warehouse.db), {
          ...(source ? { source } : {}),
          includeAccepted: o.open !== true,
        });
        printRows(rows, {
          json: o.json,
          asJson: { line: driftJson },
          none: 'no schema drift recorded: every response matched the contract',
          head: ['source', 'path', 'kind', 'expected', 'got', 'first day', 'count', 'example', 'accepted'],
          cells: (d) => [
            d.source,
            d.path,
            d.kind,
            d.expectedType ?? '',
            d.actualType ?? '',
            d.firstDay ?? '',
            String(d.count),
            d.example ?? '',
            d.acceptedAt ? d.acceptedAt.toISOString().slice(0, 19).replace('T', ' ') : '',
          ],
        });
      } finally {
        await wh.close();
      }
    });

  schema
    .command('accept')
    .description(
      'widen the contract by a field: its drift (new, missing or of another type) is accepted, no\n' +
        'longer listed by --open, and no longer quarantined under CRS_RECORD_CONTRACT=freeze',
    )
    .argument('<source>', `where the field is (${DRIFT_SOURCES.join(', ')})`)
    .argument('<path>', 'the field, as `schema changes` shows it (e.g. "Region", citations[].doi)')
    .addHelpText(
      'after',
      '\nExample, under CRS_RECORD_CONTRACT=freeze:\n' +
        '  crs-sync schema accept export Region\n' +
        '  crs-sync rejects replay --code schema_drift  loads the lines freeze held back',
    )
    .action(async (sourceArg: string, path: string) => {
      const source = parseSource(sourceArg, 'SOURCE');
      const ctx = loadContext();
      const wh = await openConfiguredWarehouse(ctx, { connections: 1 });
      try {
        const n = await acceptSchemaDrift(wh.warehouse.db, source, path);
        if (n === 0) {
          throw new CrsError(
            'USAGE',
            `no open drift of ${source} at ${JSON.stringify(path)}; see crs-sync schema changes --open`,
          );
        }
        process.stdout.write(
          `accepted ${n} drift of ${source} ${JSON.stringify(path)}: the contract now includes it\n`,
        );
      } finally {
        await wh.close();
      }
    });
}
