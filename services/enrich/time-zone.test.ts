import { describe, expect, it } from 'vitest';
import { formatInTimeZone, isValidTimeZone } from './time-zone.js';

describe('conversion_date_time in the account time zone', () => {
  const t = Date.UTC(2025, 2, 1, 12, 0, 0, 999);
  it.each([
    { tz: 'UTC', expected: '2025-03-01 12:00:00+00:00' },
    { tz: 'Europe/Berlin', expected: '2025-03-01 13:00:00+01:00' },
    { tz: 'America/New_York', expected: '2025-03-01 07:00:00-05:00' },
    { tz: 'Asia/Kolkata', expected: '2025-03-01 17:30:00+05:30' },
    { tz: 'America/St_Johns', expected: '2025-03-01 08:30:00-03:30' },
    { tz: 'Pacific/Kiritimati', expected: '2025-03-02 02:00:00+14:00' },
    { tz: 'Etc/GMT+12', expected: '2025-03-01 00:00:00-12:00' },
  ])('$tz → $expected', ({ tz, expected }) => {
    expect(formatInTimeZone(t, tz)).toBe(expected);
  });

  it('follows daylight saving time', () => {
    expect(formatInTimeZone(Date.UTC(2025, 6, 1, 12), 'Europe/Berlin')).toBe('2025-07-01 14:00:00+02:00');
    expect(formatInTimeZone(Date.UTC(2025, 2, 30, 0, 59, 59), 'Europe/Berlin')).toBe('2025-03-30 01:59:59+01:00');
    expect(formatInTimeZone(Date.UTC(2025, 2, 30, 1, 0, 0), 'Europe/Berlin')).toBe('2025-03-30 03:00:00+02:00');
  });

  it('midnight is 00, never 24', () => {
    expect(formatInTimeZone(Date.UTC(2025, 0, 1, 23), 'Europe/Berlin')).toBe('2025-01-02 00:00:00+01:00');
  });

  it.each(['Mars/Olympus', '', 'not a zone'])('rejects an unknown zone %j', (tz) => {
    expect(isValidTimeZone(tz)).toBe(false);
    expect(() => formatInTimeZone(t, tz)).toThrow(RangeError);
  });
});
