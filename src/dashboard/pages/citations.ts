/** The citation sources page: citations by type over time and by source. */

import * as Q from '../../warehouse/read/index.ts';
import { chartBox, esc, figure, int, section, table } from '../html.ts';
import {
  byDay,
  type ChartSpec,
  daysOf,
  emptyRange,
  get,
  type PageDef,
  partialDays,
  partialNote,
} from './shared.ts';

export const citations: PageDef = {
  name: 'citations',
  title: 'Citation sources',
  about:
    'Citations by type over time and by source. A citation counts on the UTC day of the history entry that cites it (or that named the cited artifact).',
  ranged: true,
  sections: {
    totals: Q.usageTotals,
    types: Q.citationTypeTotals,
    daily: Q.citationTypesDaily,
    top: Q.topCitationSources,
    partial: Q.partialDaysIn,
  },
  render(d) {
    const out: string[] = [];
    const charts: Record<string, ChartSpec> = {};
    const totals = get<Q.UsageTotals>(d, 'totals', out);
    const types = get<Q.CitationTypeTotal[]>(d, 'types', out);
    const daily = get<Q.CitationTypeDay[]>(d, 'daily', out);
    const top = get<Q.CitationSource[]>(d, 'top', out);
    out.push(emptyRange(d, totals));
    if (types) {
      out.push(
        `<div class="figures">${figure('citations', 'Citations', int(types.reduce((s, x) => s + x.citations, 0)))}${figure(
          'types',
          'Citation types',
          int(types.length),
        )}</div>`,
      );
      out.push(
        section(
          'By type',
          table(
            'types',
            [
              { title: 'Type', key: 'citationType', cell: (x) => esc(x.citationType) },
              { title: 'Citations', key: 'citations', cell: (x) => int(x.citations), numeric: true },
              { title: 'Sources', key: 'sources', cell: (x) => int(x.sources), numeric: true },
            ],
            types,
            'No citation in the range (threads not enriched yet, or none cited a source).',
          ),
        ),
      );
    }
    if (daily && daily.length > 0) {
      const names = [...new Set(daily.map((x) => x.citationType))].sort();
      charts.types = {
        days: daysOf(d),
        partial: partialDays(d),
        series: names.map((n) => ({
          label: n,
          values: byDay(
            d,
            daily.filter((x) => x.citationType === n),
            (x) => x.citations,
            0,
          ),
        })),
      };
      out.push(
        `<div class="charts">${chartBox('types', 'Citations per day by type')}</div>${partialNote(partialDays(d))}`,
      );
    }
    if (top) {
      out.push(
        section(
          `Most cited sources (top ${Q.TOP_N})`,
          table(
            'topSources',
            [
              { title: 'Type', key: 'citationType', cell: (x) => esc(x.citationType) },
              { title: 'Source', key: 'name', cell: (x) => esc(x.name) },
              { title: 'Citations', key: 'citations', cell: (x) => int(x.citations), numeric: true },
              {
                title: 'Threads (all time)',
                key: 'threadsAllTime',
                cell: (x) => int(x.threadsAllTime),
                numeric: true,
              },
            ],
            top,
            'No citation in the range.',
          ),
        ),
      );
    }
    return { html: out.join('\n'), charts };
  },
};
