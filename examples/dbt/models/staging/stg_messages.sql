-- Live messages only: a row the export stopped holding is kept with _deleted_at set.
select message_id, thread_id, user_id, message_time, message_date, response_chars
from {{ source('crs', 'analytics_messages') }}
where _deleted_at is null
