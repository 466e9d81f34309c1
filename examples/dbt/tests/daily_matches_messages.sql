-- The rows this test returns are failures: a day whose count in the warehouse's daily view
-- differs from the live messages dbt reads itself.
select d.message_date, d.messages, m.n
from {{ ref('daily') }} d
join (select message_date, count(*) as n from {{ ref('stg_messages') }} group by 1) m
  using (message_date)
where d.messages <> m.n
