// The CLI registers its subcommands by name and loads only the one being run: the table in
// lib/cli.ts must say what each command module says of itself.
import t from 'tap';
import { commandTable } from '../lib/cli.js';

t.test('command table matches the command modules', async (t) => {
  for (const c of commandTable) {
    const m = (await import(`../commands/${c.file}.js`)) as { command: string; describe: string };
    t.equal(c.command, m.command, `${c.file}: command`);
    t.equal(c.describe, m.describe, `${c.file}: describe`);
  }
});
