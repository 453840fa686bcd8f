import { z } from 'zod';

/**
 * The two paging styles (docs/api.md, "Conventions"):
 * - P4, I5, I9, I12: 1-indexed `page` and `pageSize` (default 20, at most 100),
 *   answered as a wrapper with totals;
 * - P7: 0-indexed `page` and `size` (default 20, at most 100), a bare array.
 */
const int32 = (name: string) => z.coerce.number({ error: `${name} must be an integer` }).int(`${name} must be an integer`);

export const pageQuery = z.object({
  page: int32('page').min(1, 'page is 1-indexed and must be at least 1').max(2147483647).default(1),
  pageSize: int32('pageSize').min(1, 'pageSize must be between 1 and 100').max(100, 'pageSize must be between 1 and 100').default(20),
});
export type PageQuery = z.infer<typeof pageQuery>;

export const zeroPageQuery = z.object({
  page: int32('page').min(0, 'page is 0-indexed and must be at least 0').max(2147483647).default(0),
  size: int32('size').min(1, 'size must be between 1 and 100').max(100, 'size must be between 1 and 100').default(20),
});
export type ZeroPageQuery = z.infer<typeof zeroPageQuery>;

export interface Page<T> {
  items: T[];
  page: number;
  pageSize: number;
  totalItems: number;
  totalPages: number;
}

/** Builds the paged wrapper from one page of items and the total count. */
export function page<T>(items: T[], query: PageQuery, totalItems: number): Page<T> {
  return { items, page: query.page, pageSize: query.pageSize, totalItems, totalPages: Math.ceil(totalItems / query.pageSize) };
}

/** OFFSET of a 1-indexed page. */
export const offsetOf = (query: PageQuery): number => (query.page - 1) * query.pageSize;

/** Zod schema of a paged wrapper, for OpenAPI. */
export function pageSchema<T extends z.ZodType>(item: T) {
  return z.object({ items: z.array(item), page: z.number().int(), pageSize: z.number().int(), totalItems: z.number().int(), totalPages: z.number().int() });
}
