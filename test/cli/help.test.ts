import type { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { COMMANDS, createProgram } from '../../src/cli/registry.ts';
import { secretFileSettings } from '../../src/config.ts';

/** Every command of the program, subcommands included, by its full name (`schedule pause`). */
function walk(cmd: Command, prefix: string[] = []): { name: string; cmd: Command }[] {
  return cmd.commands.flatMap((c) => {
    const path = [...prefix, c.name()];
    return [{ name: path.join(' '), cmd: c }, ...walk(c, path)];
  });
}

describe('crs-sync --help', () => {
  it('when every command is registered, then every command and subcommand has help text', async () => {
    const program = createProgram();
    for (const register of Object.values(COMMANDS)) await register(program);
    const all = walk(program);
    // Some of each: the walk reaches the subcommands.
    expect(all.map((c) => c.name)).toEqual(
      expect.arrayContaining(['status', 'schedule pause', 'schedule unpause', 'rejects dismiss', 'cancel']),
    );
    const silent = all.filter(({ cmd }) => cmd.description().trim() === '').map((c) => c.name);
    expect(silent).toEqual([]);
  });
});

describe('help text layout', () => {
  it('when help is printed to a pipe (80 columns), then every line of a description written to fit stays as written, not cut again mid-sentence', async () => {
    const program = createProgram();
    for (const register of Object.values(COMMANDS)) await register(program);
    const cut: string[] = [];
    for (const { name, cmd } of walk(program)) {
      const help = cmd.helpInformation().split('\n');
      for (const line of cmd.description().split('\n')) {
        // A one-line description longer than any written line is wrapped, as it should be.
        if (line.trim() !== '' && line.length <= 110 && !help.includes(line)) cut.push(`${name}: ${line}`);
      }
    }
    expect(cut).toEqual([]);
  });
});

describe('secrets from files in help', () => {
  it('when crs-sync --help is read, then it names the file setting of every secret this release reads', () => {
    const help = createProgram().helpInformation();
    const settings = secretFileSettings();
    expect(settings).toEqual(
      expect.arrayContaining(['DATABASE_URL_FILE', 'CRS_DASHBOARD_TOKEN_FILE', 'TEMPORAL_API_KEY_FILE']),
    );
    for (const name of settings) expect(help, name).toMatch(new RegExp(`\\b${name}\\b`));
  });
});
