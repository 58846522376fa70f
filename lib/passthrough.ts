// The subcommands that run a C tool (memleak, profile) pass their arguments through as given:
// yargs parses none of them (--help included), so the tool's own option layer answers.
import type { Argv } from 'yargs';

export interface PassthroughArgs {
  args?: (string | number)[];
}

export function passthroughBuilder(y: Argv, tool: string): Argv<PassthroughArgs> {
  return y
    .help(false)
    .version(false)
    .strict(false)
    .parserConfiguration({
      'unknown-options-as-args': true,
      'parse-numbers': false,
      'parse-positional-numbers': false,
      'short-option-groups': false,
      'camel-case-expansion': false,
      'dot-notation': false,
      'boolean-negation': false,
    })
    .positional('args', { type: 'string', array: true, describe: `${tool}'s arguments (see dwunw ${tool} --help)` }) as Argv<PassthroughArgs>;
}
