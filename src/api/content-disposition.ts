/**
 * The file name of a Content-Disposition header (RFC 6266): `filename*` (RFC 8187, UTF-8)
 * preferred over `filename`. Path separators are stripped: the name may be used to name a file.
 */
export function fileNameFromContentDisposition(header: string | null | undefined): string | undefined {
  if (!header) return undefined;
  const ext = /filename\*\s*=\s*([^']*)'[^']*'([^;]+)/i.exec(header);
  let name: string | undefined;
  if (ext?.[2]) {
    try {
      name = decodeURIComponent(ext[2].trim());
    } catch {
      name = undefined;
    }
  }
  if (name === undefined) {
    const quoted = /filename\s*=\s*"((?:[^"\\]|\\.)*)"/i.exec(header);
    const bare = /filename\s*=\s*([^;\s]+)/i.exec(header);
    name = quoted?.[1]?.replace(/\\(.)/g, '$1') ?? bare?.[1];
  }
  if (name === undefined) return undefined;
  const base = name.split(/[\\/]/).pop() ?? '';
  return base === '' || base === '.' || base === '..' ? undefined : base;
}
