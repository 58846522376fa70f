// The OTLP profiles schema (v1development), read from build/otlp/profiles.desc: a FileDescriptorSet
// that scripts/otlp-descriptors takes from PyPI's opentelemetry-proto (the version pinned in
// scripts/ensure-deps, the one whose profiles schema the Collector of test/engines/otelcol decodes).
// Messages are encoded with protobufjs from those descriptors: no field number is written here.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import protobuf from 'protobufjs';
import descriptor from 'protobufjs/ext/descriptor/index.js';
import { CliError } from './errors.js';
import { packageRoot } from './root.js';

export const OTLP_PROFILES = 'opentelemetry.proto.collector.profiles.v1development';
/** gRPC method and HTTP path of the profiles service */
export const OTLP_GRPC_PATH = `/${OTLP_PROFILES}.ProfilesService/Export`;
export const OTLP_HTTP_PATH = '/v1development/profiles';

export const schemaPath = (): string => join(packageRoot(), 'build', 'otlp', 'profiles.desc');

let root: protobuf.Root | undefined;

function load(): protobuf.Root {
  if (root) return root;
  const p = schemaPath();
  if (!existsSync(p)) throw new CliError('export', `${p} is missing (run scripts/ensure-deps, then make otlp)`);
  const set = (descriptor as unknown as { FileDescriptorSet: protobuf.Type }).FileDescriptorSet.decode(readFileSync(p));
  root = (protobuf.Root as unknown as { fromDescriptor(d: unknown, o?: { keepCase?: boolean }): protobuf.Root }).fromDescriptor(set, { keepCase: true });
  return root;
}

/** The request message of the profiles service (snake_case fields, as in the .proto). */
export function exportRequestType(): protobuf.Type {
  return load().lookupType(`${OTLP_PROFILES}.ExportProfilesServiceRequest`);
}

export function exportResponseType(): protobuf.Type {
  return load().lookupType(`${OTLP_PROFILES}.ExportProfilesServiceResponse`);
}
