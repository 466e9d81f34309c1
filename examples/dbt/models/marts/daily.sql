-- The warehouse's own daily view, joined to the ledger: which days are loaded complete.
select u.message_date, u.messages, u.active_users, u.active_threads, d.status as day_status
from {{ source('crs', 'daily_usage') }} u
left join {{ source('crs', 'sync_days') }} d on d.day = u.message_date
