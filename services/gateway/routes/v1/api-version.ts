/** The `API-Version` header of both ingestion endpoints: a supported date, or the default when absent. */
import { IngestError } from '../../problems.js';
import { API_VERSIONS, CURRENT_API_VERSION, type ApiVersion } from '../../validation/validate.js';

const VERSION_FORMAT = /^\d{4}-\d{2}-\d{2}$/;

/** `explicit`: the sender named the version (endpoint B records only an explicit one in the envelope). */
export function resolveApiVersion(header: string | string[] | undefined): { version: ApiVersion; explicit: boolean } {
  if (header === undefined) return { version: API_VERSIONS.get(CURRENT_API_VERSION)!, explicit: false };
  const value = (Array.isArray(header) ? header[0]! : header).trim();
  if (!VERSION_FORMAT.test(value)) {
    throw new IngestError('apiVersion', `API-Version must be a date YYYY-MM-DD; got "${value.slice(0, 40)}"`);
  }
  const version = API_VERSIONS.get(value);
  if (!version) {
    throw new IngestError('apiVersion', `API-Version ${value} is not supported; supported: ${[...API_VERSIONS.keys()].join(', ')}`);
  }
  return { version, explicit: true };
}
