/**
 * OpenAPI 3.1 document of the Conversational Research Service, written from its specification
 * (restated in docs/service-contract.md). Where the spec says "not shown", the simulator made a choice;
 * every such place carries `x-simulator-choice: true` and a description saying so, so a reader can
 * tell the spec apart from the simulator. The simulator's own tests validate its responses against
 * this document, and it is served at `/openapi.json`.
 */

export interface OpenApiAddresses {
  baseUrl: string;
  legacyBaseUrl: string;
  tokenUrl: string;
}

/** Defaults and limits of the history query (spec §4.6/§8: not shown; the simulator's choice). */
export const HISTORY_DEFAULT_LIMIT = 50;
export const HISTORY_MAX_LIMIT = 100;
/** Header that switches faults on for one request (simulator only). */
export const FAULT_HEADER = 'x-sim-faults';
/** Path of the token-exchange endpoint under the base address (spec §5: not shown). */
export const TOKEN_PATH = '/oauth/token';
/** Path prefix of the legacy client API under the simulator's address (spec: not shown). */
export const LEGACY_PREFIX = '/legacy';
/** Path of the SSE thread event stream (spec §4.11: not shown). */
export const EVENTS_PATH = '/v2/threads/{thread_id}/events';

type Json = Record<string, unknown>;

const ref = (name: string): Json => ({ $ref: `#/components/schemas/${name}` });
const choice = (text: string): Json => ({
  'x-simulator-choice': true,
  description: `Simulator's choice: ${text}`,
});

const uuidPattern = '^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$';
/** ISO 8601 with a mandatory UTC offset (Z or ±hh:mm), as spec §2 requires of Message Time. */
const offsetTimePattern = '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d{1,9})?(Z|[+-]\\d{2}:\\d{2})$';
const utcTimePattern = '^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d{1,9})?Z$';

const jsonBody = (schema: Json, description = 'OK'): Json => ({
  description,
  content: { 'application/json': { schema } },
});

function errorResponse(description: string): Json {
  return jsonBody(ref('Error'), description);
}

/** Responses every operation may give when faults are switched on (simulator only). */
const faultResponses: Json = {
  '429': {
    ...errorResponse('Too Many Requests (simulator fault `429`). Spec §8: rate limits not shown.'),
    headers: {
      'Retry-After': {
        description: 'Seconds to wait before retrying.',
        schema: { type: 'string', pattern: '^\\d+$' },
      },
    },
  },
  '5XX': errorResponse('Server error (simulator fault `5xx`, in bursts).'),
};

const threadIdParam: Json = {
  name: 'thread_id',
  in: 'path',
  required: true,
  schema: { type: 'string' },
  description: 'Thread identifier (UUID form in the simulator).',
};
const artifactIdParam: Json = {
  name: 'artifact_id',
  in: 'path',
  required: true,
  schema: { type: 'string' },
  description: 'Artifact identifier, as listed in `artifact_ids` of a history entry.',
};

const threadErrors: Json = {
  '401': errorResponse(
    "Missing, invalid or expired access token. Spec §7 names 401 only for the export; the simulator's choice.",
  ),
  '403': errorResponse(
    "The caller may not access this thread. Simulator's choice: threads of restricted users (spec §4.5 says access is checked; status not shown).",
  ),
  '404': errorResponse("Unknown or deleted thread. Simulator's choice (spec §7: not shown)."),
};

function op(o: Json, security: string, errors: Json): Json {
  return {
    ...o,
    security: [{ [security]: [] }],
    responses: { ...(o.responses as Json), ...errors, ...faultResponses },
  };
}

const citationSchema: Json = {
  type: 'object',
  description:
    "Source metadata (spec §2). The eight spec fields are always present. Type-specific extras (spec: names not shown) are the simulator's choice: web → url, snippet_start, snippet_end; news_development → url, article_count, published_at; document → document_id, page; custom_doc → file_id, file_name; artifact citations may carry data_point (index of the tied data point).",
  'x-simulator-choice': true,
  required: [
    'id',
    'internal_id',
    'citation_type',
    'name',
    'inline_offset',
    'summary',
    'last_updated_at',
    'is_snippet',
  ],
  properties: {
    id: { type: 'string' },
    internal_id: { type: 'string' },
    citation_type: {
      type: 'string',
      description: 'Named values: custom_doc, web, news_development, document. The full list is not shown.',
    },
    name: { type: 'string' },
    inline_offset: { type: 'integer', minimum: 0, description: 'Position (UTF-16 code unit) in the text.' },
    summary: { type: 'string' },
    last_updated_at: { type: 'string', format: 'date-time', pattern: utcTimePattern },
    is_snippet: { type: 'boolean' },
    url: { type: 'string', format: 'uri' },
    snippet_start: { type: 'integer', minimum: 0 },
    snippet_end: { type: 'integer', minimum: 0 },
    article_count: { type: 'integer', minimum: 1 },
    published_at: { type: 'string', format: 'date-time' },
    document_id: { type: 'string' },
    page: { type: 'integer', minimum: 1 },
    file_id: { type: 'string' },
    file_name: { type: 'string' },
    data_point: { type: 'integer', minimum: 0 },
  },
  additionalProperties: true,
};

const historyMessageSchema: Json = {
  type: 'object',
  description:
    'History entry (spec §2 names message_id and citations; every other field is the simulator\'s choice). Each turn of a thread gives a `user` entry (the input) followed by an `assistant` entry (the reply, with citations and artifact_ids) or, when the task was cancelled, a `system` entry whose content is exactly "User cancelled" and whose status is `cancelled`. The `Message ID` of an analytics export record equals the message_id of that second entry (assistant reply or cancellation). History ids are lower-case.',
  'x-simulator-choice': true,
  required: ['message_id', 'role', 'content', 'created_at', 'citations', 'artifact_ids', 'status'],
  properties: {
    message_id: { type: 'string', pattern: uuidPattern },
    role: { type: 'string', enum: ['user', 'assistant', 'system'] },
    content: {
      type: 'string',
      description: "Text of the entry; equals the export record's Input or Response.",
    },
    created_at: { type: 'string', format: 'date-time', pattern: utcTimePattern },
    citations: { type: 'array', items: ref('Citation') },
    artifact_ids: { type: 'array', items: { type: 'string' } },
    status: { type: 'string', enum: ['completed', 'cancelled'] },
  },
  additionalProperties: false,
};

const artifactSchema: Json = {
  type: 'object',
  description:
    'Artifact (spec §2). Simulator\'s choice for output_type values: text, table, chart. For text, val is plain text; for table, val is a JSON string {"columns": [string], "rows": [[string|number]]}; for chart, val is a JSON string {"chart_type": "bar"|"line", "x": [string], "series": [{"name": string, "values": [number]}]}.',
  'x-simulator-choice': true,
  required: ['output_type', 'title', 'citations', 'val', 'resolved_text_objects'],
  properties: {
    output_type: {
      type: 'string',
      description: 'The value text exists; the simulator also uses table and chart.',
    },
    title: { type: 'string', description: 'May be empty.' },
    citations: { type: 'array', items: ref('Citation') },
    val: { type: 'string' },
    resolved_text_objects: { type: 'boolean' },
  },
  additionalProperties: false,
};

const analyticsRecordSchema: Json = {
  type: 'object',
  description:
    'One line of the export (spec §2). The six keys are always present. Simulator\'s choices: some records carry additional keys not named by the spec (e.g. "Model", "Latency Ms"); ids are occasionally upper-case; Message Time carries various offsets (Z, +00:00, +05:30, -04:00, ...), with or without milliseconds, while the date filter is by the UTC instant; Message ID equals the message_id of the assistant reply (or the "User cancelled" entry) in the thread\'s history, and Message Time is the same instant as that entry\'s created_at; a cancelled task has an empty Response. Lines of a day are not sorted by time.',
  'x-simulator-choice': true,
  required: ['Input', 'Response', 'Message ID', 'Message Time', 'Thread ID', 'User ID'],
  properties: {
    Input: { type: 'string' },
    Response: { type: 'string' },
    'Message ID': { type: 'string', pattern: uuidPattern },
    'Message Time': { type: 'string', format: 'date-time', pattern: offsetTimePattern },
    'Thread ID': { type: 'string', pattern: uuidPattern },
    'User ID': { type: 'string', pattern: uuidPattern },
  },
  additionalProperties: true,
};

const threadEntrySchema: Json = {
  type: 'object',
  ...choice(
    'spec §2 does not show the fields of a thread list entry; the simulator gives thread_id, thread_name (current name, after renames), user_id, created_at, updated_at and message_count (history entries so far).',
  ),
  required: ['thread_id', 'thread_name', 'user_id', 'created_at', 'updated_at', 'message_count'],
  properties: {
    thread_id: { type: 'string', pattern: uuidPattern },
    thread_name: { type: 'string' },
    user_id: { type: 'string', pattern: uuidPattern },
    created_at: { type: 'string', format: 'date-time', pattern: utcTimePattern },
    updated_at: { type: 'string', format: 'date-time', pattern: utcTimePattern },
    message_count: { type: 'integer', minimum: 0 },
  },
  additionalProperties: false,
};

const taskStatus = { type: 'string', enum: ['idle', 'queued', 'running', 'completed', 'cancelled'] };

const eventSchemas: Record<string, Json> = {
  ReasoningEvent: {
    type: 'object',
    required: ['task_id', 'text'],
    properties: { task_id: { type: 'string' }, text: { type: 'string' } },
  },
  MessageChunkEvent: {
    type: 'object',
    required: ['task_id', 'message_id', 'index', 'delta', 'citations'],
    properties: {
      task_id: { type: 'string' },
      message_id: { type: 'string' },
      index: { type: 'integer', minimum: 0 },
      delta: { type: 'string' },
      citations: { type: 'array', items: ref('Citation') },
    },
  },
  ArtifactEvent: {
    type: 'object',
    required: ['task_id', 'message_id', 'artifact_id', 'artifact'],
    properties: {
      task_id: { type: 'string' },
      message_id: { type: 'string' },
      artifact_id: { type: 'string' },
      artifact: ref('Artifact'),
    },
  },
  FinalMessageEvent: {
    type: 'object',
    required: ['task_id', 'message'],
    properties: { task_id: { type: 'string' }, message: ref('HistoryMessage') },
  },
  CompletionEvent: {
    type: 'object',
    required: ['task_id', 'status'],
    properties: {
      task_id: { type: ['string', 'null'] },
      status: { type: 'string', enum: ['completed', 'cancelled', 'idle'] },
      message_id: { type: ['string', 'null'] },
    },
  },
};

/**
 * The simulator's OpenAPI document. Long: it is the document itself, one literal in the order of
 * the spec's sections, so that it reads (and is compared with the spec) top to bottom.
 */
export function buildOpenApiDocument(addr: OpenApiAddresses): Json {
  const legacyServers = [{ url: addr.legacyBaseUrl, description: '{legacy_base_url}' }];
  const tokenServer = [
    { url: addr.tokenUrl.replace(/\/oauth\/token$/, ''), description: 'token endpoint host' },
  ];

  const paths: Json = {
    '/v2/threads': {
      post: op(
        {
          operationId: 'createThread',
          summary: 'Create thread (§4.1)',
          requestBody: {
            required: true,
            content: {
              'application/json': {
                schema: {
                  type: 'object',
                  required: ['thread_name'],
                  properties: { thread_name: { type: 'string' } },
                },
              },
            },
          },
          responses: {
            '201': jsonBody(
              {
                type: 'object',
                required: ['thread_id', 'thread_name', 'created_at'],
                properties: {
                  thread_id: { type: 'string', pattern: uuidPattern },
                  thread_name: { type: 'string' },
                  created_at: { type: 'string', format: 'date-time' },
                },
                ...choice('status 201 and the fields besides thread_id.'),
              },
              'Created',
            ),
            '422': errorResponse('thread_name missing or not a string, or the body is not a JSON object.'),
          },
        },
        'accessToken',
        { '401': threadErrors['401'] },
      ),
      get: op(
        {
          operationId: 'listThreads',
          summary: 'List threads (§4.2)',
          description:
            "Simulator's choice: no paging (the spec shows none); every thread that exists now and is not deleted, including threads of restricted users (their contents answer 403).",
          responses: {
            '200': jsonBody({
              type: 'object',
              required: ['threads'],
              properties: { threads: { type: 'array', items: ref('ThreadEntry') } },
              additionalProperties: false,
            }),
          },
        },
        'accessToken',
        { '401': threadErrors['401'] },
      ),
    },
    '/v2/threads/{thread_id}': {
      parameters: [threadIdParam],
      patch: op(
        {
          operationId: 'renameThread',
          summary: 'Rename thread (§4.3)',
          requestBody: {
            required: true,
            content: {
              'application/json': {
                schema: { type: 'object', required: ['name'], properties: { name: { type: 'string' } } },
              },
            },
          },
          responses: {
            '200': jsonBody({
              type: 'object',
              required: ['thread_id', 'thread_name'],
              properties: { thread_id: { type: 'string' }, thread_name: { type: 'string' } },
              ...choice('the response body (spec: not shown).'),
            }),
            '422': errorResponse('name missing or not a string.'),
          },
        },
        'accessToken',
        threadErrors,
      ),
      delete: op(
        {
          operationId: 'deleteThread',
          summary: 'Delete thread (§4.4)',
          description:
            'Permanently removes the thread with its history and artifacts; later reads answer 404 and its records leave the analytics export.',
          responses: {
            '204': {
              description: "No content (simulator's choice; spec: not shown).",
              'x-simulator-choice': true,
            },
          },
        },
        'accessToken',
        threadErrors,
      ),
    },
    '/v2/threads/{thread_id}/messages': {
      parameters: [threadIdParam],
      post: op(
        {
          operationId: 'sendMessage',
          summary: 'Send message (§4.5)',
          description:
            'Queues a task and returns at once. The task later writes the assistant entry (or, if cancelled, a "User cancelled" entry). Simulator\'s choices: 409 while another task of the thread is queued or running; a message naming the file_id of a file uploaded to the thread is answered with a custom_doc citation of it.',
          requestBody: {
            required: true,
            content: {
              'application/x-www-form-urlencoded': {
                schema: {
                  type: 'object',
                  required: ['message'],
                  properties: { message: { type: 'string' } },
                },
              },
              'multipart/form-data': {
                schema: {
                  type: 'object',
                  required: ['message'],
                  properties: { message: { type: 'string' } },
                },
              },
            },
          },
          responses: {
            '202': jsonBody(
              {
                type: 'object',
                required: ['thread_id', 'task_id', 'message_id', 'status'],
                properties: {
                  thread_id: { type: 'string' },
                  task_id: { type: 'string' },
                  message_id: { type: 'string', description: 'message_id of the user entry.' },
                  status: { const: 'queued' },
                },
                ...choice('status 202 and every field (spec: not shown).'),
              },
              'Accepted',
            ),
            '409': errorResponse("A task is already queued or running in this thread (simulator's choice)."),
            '422': errorResponse('message missing or empty.'),
          },
        },
        'accessToken',
        threadErrors,
      ),
      get: op(
        {
          operationId: 'listMessages',
          summary: 'List messages, the thread history (§4.6)',
          parameters: [
            {
              name: 'start_index',
              in: 'query',
              schema: { type: 'integer', minimum: 0, default: 0 },
              ...choice('default 0; negative or non-integer values answer 422.'),
            },
            {
              name: 'limit_num',
              in: 'query',
              schema: {
                type: 'integer',
                minimum: 1,
                maximum: HISTORY_MAX_LIMIT,
                default: HISTORY_DEFAULT_LIMIT,
              },
              ...choice(
                `default ${HISTORY_DEFAULT_LIMIT}, maximum ${HISTORY_MAX_LIMIT}; values outside 1..${HISTORY_MAX_LIMIT} answer 422.`,
              ),
            },
          ],
          responses: {
            '200': jsonBody({
              type: 'object',
              required: ['messages'],
              properties: { messages: { type: 'array', items: ref('HistoryMessage') } },
              additionalProperties: false,
            }),
            '422': errorResponse('start_index or limit_num invalid.'),
          },
        },
        'accessToken',
        threadErrors,
      ),
    },
    '/v2/threads/{thread_id}/progress': {
      parameters: [threadIdParam],
      get: op(
        {
          operationId: 'getThreadProgress',
          summary: 'Get thread progress (§4.7)',
          responses: {
            '200': jsonBody({
              type: 'object',
              required: [
                'thread_id',
                'task_id',
                'status',
                'progress',
                'steps_completed',
                'steps_total',
                'message_id',
              ],
              properties: {
                thread_id: { type: 'string' },
                task_id: { type: ['string', 'null'] },
                status: taskStatus,
                progress: { type: 'number', minimum: 0, maximum: 1 },
                steps_completed: { type: 'integer', minimum: 0 },
                steps_total: { type: 'integer', minimum: 0 },
                message_id: {
                  type: ['string', 'null'],
                  description: 'The entry the task wrote (assistant reply or "User cancelled"), once done.',
                },
              },
              ...choice('every field (spec: not shown). status idle = the thread never had a task.'),
            }),
          },
        },
        'accessToken',
        threadErrors,
      ),
    },
    '/v2/threads/{thread_id}/task': {
      parameters: [threadIdParam],
      delete: op(
        {
          operationId: 'cancelThreadTask',
          summary: 'Cancel thread task (§4.8)',
          description: 'Stops the running task and records a system entry reading "User cancelled".',
          responses: {
            '200': jsonBody({
              type: 'object',
              required: ['thread_id', 'task_id', 'status', 'message_id'],
              properties: {
                thread_id: { type: 'string' },
                task_id: { type: 'string' },
                status: { const: 'cancelled' },
                message_id: { type: 'string', description: 'message_id of the "User cancelled" entry.' },
              },
              ...choice('the response body (spec: not shown).'),
            }),
            '409': errorResponse("No task is queued or running (simulator's choice)."),
          },
        },
        'accessToken',
        threadErrors,
      ),
    },
    '/v2/threads/{thread_id}/files': {
      parameters: [threadIdParam],
      post: op(
        {
          operationId: 'uploadFile',
          summary: 'Upload file to a thread (§4.9)',
          requestBody: {
            required: true,
            content: {
              'multipart/form-data': {
                schema: {
                  type: 'object',
                  required: ['file'],
                  properties: { file: { type: 'string', contentMediaType: 'application/octet-stream' } },
                },
              },
            },
          },
          responses: {
            '201': jsonBody(
              {
                type: 'object',
                required: ['file_id', 'file_name', 'size_bytes', 'content_type'],
                properties: {
                  file_id: { type: 'string' },
                  file_name: { type: 'string' },
                  size_bytes: { type: 'integer', minimum: 0 },
                  content_type: { type: 'string' },
                },
                ...choice('status 201 and the fields besides file_id; file size limit 10 MiB (413 above).'),
              },
              'Created',
            ),
            '413': errorResponse("File larger than 10 MiB (simulator's choice)."),
            '422': errorResponse('No multipart part named file.'),
          },
        },
        'accessToken',
        threadErrors,
      ),
    },
    '/v2/threads/{thread_id}/artifacts/{artifact_id}': {
      parameters: [threadIdParam, artifactIdParam],
      get: op(
        {
          operationId: 'getArtifact',
          summary: 'Get artifact (§4.10)',
          responses: {
            '200': jsonBody({
              type: 'object',
              required: ['artifact'],
              properties: { artifact: ref('Artifact') },
              additionalProperties: false,
            }),
            '422': errorResponse("Malformed thread_id (not UUID form) or artifact_id (simulator's rule)."),
          },
        },
        'accessToken',
        {
          ...threadErrors,
          '404': errorResponse('Unknown or deleted thread, or unknown artifact.'),
        },
      ),
    },
    [EVENTS_PATH]: {
      parameters: [threadIdParam],
      get: op(
        {
          operationId: 'streamThreadEvents',
          summary: 'Stream thread events, SSE (§4.11)',
          description:
            "Simulator's choice of path and payloads (spec: not shown). The stream replays the events of the thread's current (or most recent) task, then follows it live, and closes after the `completion` event. Event names: reasoning (ReasoningEvent), message_chunk (MessageChunkEvent, with the citations whose inline_offset falls in the chunk), artifact (ArtifactEvent), final_message (FinalMessageEvent), completion (CompletionEvent; status idle when the thread never had a task). Each SSE `data:` line is one JSON object; `id:` counts events from 0.",
          'x-simulator-choice': true,
          responses: {
            '200': {
              description: 'text/event-stream',
              content: {
                'text/event-stream': {
                  schema: { type: 'string' },
                  'x-sse-events': {
                    reasoning: ref('ReasoningEvent'),
                    message_chunk: ref('MessageChunkEvent'),
                    artifact: ref('ArtifactEvent'),
                    final_message: ref('FinalMessageEvent'),
                    completion: ref('CompletionEvent'),
                  },
                },
              },
            },
          },
        },
        'accessToken',
        threadErrors,
      ),
    },
    '/v2/analytics/messages': {
      get: op(
        {
          operationId: 'getMessageHistoryAnalytics',
          summary: 'Get message history, analytics export (§4.12)',
          description:
            'JSONL stream, one record per line. start_date is inclusive from 00:00:00 UTC, end_date inclusive to 23:59:59.999 UTC, both by the UTC instant of Message Time. Either or both may be omitted (or given empty or as the word null). Streamed, not buffered. Records of deleted threads are not exported; records that arrive late appear only once they have arrived.',
          parameters: [
            {
              name: 'start_date',
              in: 'query',
              schema: { type: ['string', 'null'], format: 'date' },
              description: 'YYYY-MM-DD; inclusive from 00:00:00 UTC.',
            },
            {
              name: 'end_date',
              in: 'query',
              schema: { type: ['string', 'null'], format: 'date' },
              description: 'YYYY-MM-DD; inclusive to 23:59:59 UTC.',
            },
          ],
          responses: {
            '200': {
              description: 'JSONL stream of AnalyticsRecord',
              headers: {
                'Content-Disposition': {
                  description:
                    'attachment; filename="message_history_{timestamp}.jsonl", timestamp as YYYYMMDDTHHMMSSZ (format: simulator\'s choice)',
                  schema: {
                    type: 'string',
                    pattern: '^attachment; filename="message_history_\\d{8}T\\d{6}Z\\.jsonl"$',
                  },
                },
              },
              content: {
                'application/x-ndjson': {
                  // OpenAPI 3.1 has no way to type the lines of a JSONL body (3.2's itemSchema);
                  // the extension carries the schema of each line.
                  schema: { type: 'string', description: 'JSON Lines: one AnalyticsRecord per line.' },
                  'x-item-schema': ref('AnalyticsRecord'),
                },
              },
            },
            '401': errorResponse('Missing, invalid or expired service-account JWT.'),
            '422': errorResponse('Malformed date, or start_date after end_date.'),
          },
        },
        'serviceAccountJwt',
        {},
      ),
    },
    [TOKEN_PATH]: {
      servers: tokenServer,
      post: {
        operationId: 'exchangeToken',
        summary: 'OAuth 2.0 token exchange, RFC 8693',
        description:
          "Simulator's choice of address and procedure (spec §5: not shown). Exchanges a service-account JWT (subject_token) for a v2 access token. Errors follow RFC 6749 §5.2.",
        'x-simulator-choice': true,
        security: [],
        requestBody: {
          required: true,
          content: {
            'application/x-www-form-urlencoded': {
              schema: {
                type: 'object',
                required: ['grant_type', 'client_id', 'client_secret', 'subject_token', 'subject_token_type'],
                properties: {
                  grant_type: { const: 'urn:ietf:params:oauth:grant-type:token-exchange' },
                  client_id: { type: 'string' },
                  client_secret: { type: 'string' },
                  subject_token: { type: 'string', description: 'The service-account JWT.' },
                  subject_token_type: {
                    type: 'string',
                    enum: [
                      'urn:ietf:params:oauth:token-type:jwt',
                      'urn:ietf:params:oauth:token-type:access_token',
                    ],
                  },
                  requested_token_type: { type: 'string' },
                  audience: { type: 'string' },
                  scope: { type: 'string' },
                },
              },
            },
          },
        },
        responses: {
          '200': jsonBody({
            type: 'object',
            required: ['access_token', 'issued_token_type', 'token_type', 'expires_in'],
            properties: {
              access_token: { type: 'string' },
              issued_token_type: { const: 'urn:ietf:params:oauth:token-type:access_token' },
              token_type: { const: 'Bearer' },
              expires_in: { type: 'integer', minimum: 1 },
            },
          }),
          '400': jsonBody(ref('OAuthError'), 'invalid_request, unsupported_grant_type or invalid_grant'),
          '401': jsonBody(ref('OAuthError'), 'invalid_client'),
          ...faultResponses,
        },
      },
    },
    '/client/v2/thread/{thread_id}/artifact/{artifact_id}': {
      servers: legacyServers,
      parameters: [threadIdParam, artifactIdParam],
      get: op(
        {
          operationId: 'legacyGetThreadArtifact',
          summary: 'Legacy: get thread artifact (§4.10)',
          responses: {
            '200': jsonBody({
              type: 'object',
              required: ['artifact_id', 'artifact'],
              properties: { artifact_id: { type: 'string' }, artifact: ref('Artifact') },
              additionalProperties: false,
            }),
            '404': errorResponse("Unknown or deleted thread, or unknown artifact (simulator's choice)."),
            '403': errorResponse("Thread of a restricted user (simulator's choice)."),
            '422': errorResponse('Malformed thread_id (not UUID form) or artifact_id.'),
          },
        },
        'apiKey',
        { '401': errorResponse("Missing or unknown x-api-key (simulator's choice of status).") },
      ),
    },
    '/client/agent/dynamic-output/{agent_id}': {
      servers: legacyServers,
      parameters: [
        {
          name: 'agent_id',
          in: 'path',
          required: true,
          schema: { type: 'string' },
          ...choice('must be in UUID form (422 otherwise); any UUID names an agent.'),
        },
      ],
      get: op(
        {
          operationId: 'legacyGetAgentDynamicOutput',
          summary: 'Legacy: get agent dynamic output (§4.13)',
          responses: {
            '200': jsonBody({ type: 'string', description: 'A single JSON value, a string.' }),
            '422': errorResponse('Malformed agent_id.'),
          },
        },
        'apiKey',
        { '401': errorResponse("Missing or unknown x-api-key (simulator's choice of status).") },
      ),
    },
  };

  return {
    openapi: '3.1.0',
    jsonSchemaDialect: 'https://spec.openapis.org/oas/3.1/dialect/base',
    info: {
      title: 'Conversational Research Service (crs-sync simulator)',
      version: '2.0.0-preview-sim',
      description: [
        "Written from the service's API specification. This document describes the SIMULATOR shipped with crs-sync, not the real service.",
        'Where the spec says "not shown", the simulator chose a behaviour; those places carry `x-simulator-choice: true`.',
        'Error bodies (simulator\'s choice): FastAPI-like `{"detail": string}`, or for 422 `{"detail": [{"loc": [...], "msg": string, "type": string}]}`.',
        `Faults (simulator only): header \`${FAULT_HEADER}\` with a fault spec (see src/simulator/README.md) switches faults on for one request.`,
      ].join('\n\n'),
    },
    servers: [{ url: addr.baseUrl, description: '{base_url}' }],
    'x-legacy-base-url': addr.legacyBaseUrl,
    'x-token-url': addr.tokenUrl,
    paths,
    components: {
      securitySchemes: {
        accessToken: {
          type: 'http',
          scheme: 'bearer',
          description: `Version 2 thread API (§5): an OAuth 2.0 access token obtained by RFC 8693 token exchange at ${addr.tokenUrl}. Simulator's choice: HS256 JWT with audience crs-v2, lifetime 3600 s (fault ttl=... shortens it).`,
        },
        serviceAccountJwt: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'JWT',
          description:
            "Analytics export (§5): a service-account JWT. Simulator's choice: HS256, audience crs-analytics, signature and exp verified.",
        },
        apiKey: { type: 'apiKey', in: 'header', name: 'x-api-key', description: 'Legacy client API (§5).' },
      },
      schemas: {
        Error: {
          type: 'object',
          ...choice('FastAPI-like error body (spec §7: not shown).'),
          required: ['detail'],
          properties: {
            detail: {
              oneOf: [
                { type: 'string' },
                {
                  type: 'array',
                  items: {
                    type: 'object',
                    required: ['loc', 'msg', 'type'],
                    properties: {
                      loc: { type: 'array', items: { type: ['string', 'integer'] } },
                      msg: { type: 'string' },
                      type: { type: 'string' },
                    },
                  },
                },
              ],
            },
          },
        },
        OAuthError: {
          type: 'object',
          required: ['error'],
          properties: { error: { type: 'string' }, error_description: { type: 'string' } },
        },
        Citation: citationSchema,
        HistoryMessage: historyMessageSchema,
        Artifact: artifactSchema,
        AnalyticsRecord: analyticsRecordSchema,
        ThreadEntry: threadEntrySchema,
        ...eventSchemas,
      },
    },
  };
}
