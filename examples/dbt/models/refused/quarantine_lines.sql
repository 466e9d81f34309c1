-- Must fail: the quarantine holds whole lines as the service sent them, and the reader role
-- made by `crs-sync grant-reader` may not read them.
select id, raw from {{ source('crs_internal', 'rejected_records') }}
