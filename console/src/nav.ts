let router: () => Promise<void> = async () => {};
export const setRouter = (r: () => Promise<void>) => { router = r; };

/** Goes to a hash route (runs the route again when it is the current one). */
export const go = (hash: string): void => {
  if (location.hash === hash) void router();
  else location.hash = hash;
};

export const wsPath = (workspace: string, ...rest: string[]) => `#/w/${[workspace, ...rest].map(encodeURIComponent).join('/')}`;
