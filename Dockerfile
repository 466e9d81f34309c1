# The crs-sync image: the CLI, run by Node 24's type stripping (no build step). One image serves
# `worker` (the default), `migrate`, `sim` and every other command.
FROM node:24-bookworm-slim

ENV NODE_ENV=production
WORKDIR /app

COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

COPY bin ./bin
COPY src ./src
COPY workflows ./workflows
COPY activities ./activities
COPY contract ./contract
COPY migrations ./migrations

# The simulator's variables are shared with the worker through a volume mounted here; a named
# volume takes the owner of the directory it is mounted on.
RUN mkdir -p /var/lib/crs-sim && chown node:node /var/lib/crs-sim
USER node

CMD ["node", "bin/crs-sync.js", "worker"]
