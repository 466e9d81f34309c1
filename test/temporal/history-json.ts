import { createRequire } from 'node:module';

/**
 * A history file (`temporal workflow show --output json`) as the History object the replayer
 * takes. The SDK's own historyFromJSON fails in this install: @temporalio/common and
 * @temporalio/proto each carry a copy of protobufjs, and its JSON reader rejects the other
 * copy's types ("type must be a Type"). Reading with the copy that defined the types avoids it;
 * the files already hold canonical enum names, so nothing else needs fixing.
 */
const fromProto = createRequire(createRequire(import.meta.url).resolve('@temporalio/proto'));
const { fromJson } = fromProto('protobufjs/ext/protojson') as {
  fromJson(type: unknown, json: unknown, options: { ignoreUnknownFields: boolean }): unknown;
};
const { patchProtobufRoot } = fromProto('../lib/patch-protobuf-root.js') as {
  patchProtobufRoot(root: unknown): { lookupType(name: string): unknown };
};
const historyType = patchProtobufRoot(fromProto('./index.js')).lookupType('temporal.api.history.v1.History');

export function historyFromFile(json: unknown): unknown {
  return fromJson(historyType, json, { ignoreUnknownFields: true });
}
