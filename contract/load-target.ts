/**
 * What one load loads (a closed day, an open day, a file), its run id and its load id: the
 * project's one load target type (src/common/load-target.ts), re-exported here so that workflows
 * and activities speak one module. Recorded in histories (inside `SyncDayInput`, `DayLoadInput`,
 * `ReleaseDayInput`): rename nothing. Pure: workflow code imports this module.
 */
export {
  type ClosedDayLoad,
  closedDayLoad,
  type DayLoad,
  type DayRange,
  dayLoad,
  dayLoadOf,
  type FileLoad,
  isDayLoad,
  type LoadTarget,
  loadIdOf,
  type OpenDayLoad,
  openDayLoad,
  type RecordedDayLoad,
} from '../src/common/load-target.ts';
