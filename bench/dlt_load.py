"""dlt baseline of the ingest benchmark (bench/ingest.ts runs it in bench/.venv).

Loads a JSONL analytics export into Postgres with a dlt resource keyed on the message id and
write_disposition="merge", the way a data team would write it with dlt: records as parsed, with
type hints for the ids and the time. Prints one JSON line with the counts and stage timings.

    python bench/dlt_load.py FILE DATABASE_URL DATASET PIPELINES_DIR
"""

import json
import sys
import time
from urllib.parse import urlsplit, urlunsplit

import dlt
import orjson


def with_password(url: str) -> str:
    # dlt insists on a password; a server that trusts the connection (no password in the URL)
    # ignores whatever is sent.
    u = urlsplit(url)
    if u.password is not None:
        return url
    user = u.username or "postgres"
    host = u.hostname or "localhost"
    netloc = f"{user}:unused@{host}" + (f":{u.port}" if u.port else "")
    return urlunsplit((u.scheme, netloc, u.path, u.query, u.fragment))


def main() -> None:
    file, url, dataset, pipelines_dir = sys.argv[1:5]
    url = with_password(url)

    @dlt.resource(
        name="analytics_messages",
        primary_key="Message ID",
        write_disposition="merge",
        columns={
            "Message ID": {"data_type": "text", "nullable": False},
            "Thread ID": {"data_type": "text"},
            "User ID": {"data_type": "text"},
            "Message Time": {"data_type": "timestamp"},
            "Input": {"data_type": "text"},
            "Response": {"data_type": "text"},
        },
    )
    def messages():
        batch = []
        with open(file, "rb") as f:
            for line in f:
                if line.strip():
                    batch.append(orjson.loads(line))
                    if len(batch) == 5000:
                        yield batch
                        batch = []
        if batch:
            yield batch

    pipeline = dlt.pipeline(
        pipeline_name="crs_bench",
        pipelines_dir=pipelines_dir,
        destination=dlt.destinations.postgres(credentials=url),
        dataset_name=dataset,
        progress=None,
    )
    t0 = time.perf_counter()
    pipeline.extract(messages())
    t1 = time.perf_counter()
    pipeline.normalize()
    t2 = time.perf_counter()
    info = pipeline.load()
    t3 = time.perf_counter()
    info.raise_on_failed_jobs()

    with pipeline.sql_client() as c:
        rows = c.execute_sql(f"select count(*) from {c.make_qualified_table_name('analytics_messages')}")[0][0]
    print(
        json.dumps(
            {
                "dlt_version": dlt.__version__,
                "rows": rows,
                "elapsed_s": t3 - t0,
                "extract_s": t1 - t0,
                "normalize_s": t2 - t1,
                "load_s": t3 - t2,
            }
        )
    )


if __name__ == "__main__":
    main()
