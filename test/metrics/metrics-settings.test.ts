import { describe, expect, it } from 'vitest';
import { parseWorkerSettings } from '../../src/temporal/worker-settings.ts';

describe('where the worker serves /metrics (CRS_METRICS_PORT, CRS_METRICS_HOST, TEMPORAL_METRICS_ADDRESS)', () => {
  it('when nothing is set, then it listens on 0.0.0.0:9464', () => {
    expect(parseWorkerSettings({}).metrics).toEqual({ host: '0.0.0.0', port: 9464 });
  });

  it('when CRS_METRICS_PORT names a port, then it listens there; when it is 0, there is no endpoint', () => {
    expect(parseWorkerSettings({ CRS_METRICS_PORT: '9471' }).metrics).toEqual({
      host: '0.0.0.0',
      port: 9471,
    });
    expect(parseWorkerSettings({ CRS_METRICS_PORT: '0' }).metrics).toBeUndefined();
  });

  it('when only the older TEMPORAL_METRICS_ADDRESS is set, then it is honoured, empty meaning off', () => {
    expect(parseWorkerSettings({ TEMPORAL_METRICS_ADDRESS: '127.0.0.1:9500' }).metrics).toEqual({
      host: '127.0.0.1',
      port: 9500,
    });
    expect(parseWorkerSettings({ TEMPORAL_METRICS_ADDRESS: '' }).metrics).toBeUndefined();
  });

  it('when both are set, then CRS_METRICS_PORT and CRS_METRICS_HOST win', () => {
    expect(
      parseWorkerSettings({
        TEMPORAL_METRICS_ADDRESS: '',
        CRS_METRICS_PORT: '9470',
        CRS_METRICS_HOST: '127.0.0.1',
      }).metrics,
    ).toEqual({ host: '127.0.0.1', port: 9470 });
  });

  it('when a setting is malformed, then it is a configuration error naming it', () => {
    expect(() => parseWorkerSettings({ CRS_METRICS_PORT: '70000' })).toThrow(/CRS_METRICS_PORT/);
    expect(() => parseWorkerSettings({ TEMPORAL_METRICS_ADDRESS: 'no-port' })).toThrow(
      /TEMPORAL_METRICS_ADDRESS/,
    );
  });
});
