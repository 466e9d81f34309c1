{{ config(materialized='incremental', unique_key='user_day') }}
-- One row a user and day, merged on later runs for the days loaded since (dbt's incremental
-- path: a temporary table and a delete+insert in the reader's own schema).
select user_id::text || '/' || message_date::text as user_day,
       user_id, message_date, count(*) as messages, sum(response_chars) as response_chars
from {{ ref('stg_messages') }}
{% if is_incremental() %}
where message_date >= (select coalesce(max(message_date), '1970-01-01') from {{ this }})
{% endif %}
group by user_id, message_date
