import { z } from 'zod';
import { defineRoute, type RouteDef } from '../http/api.js';
import { MAX_PASSWORD_LENGTH, MIN_PASSWORD_LENGTH } from './accounts.js';
import type { SignInService } from './service.js';

const username = z.string().min(1).max(256).regex(/^[^\u0000-\u001f\u007f]+$/u, 'must not hold control characters');

const passwordBody = z.strictObject({
  password: z.string({ error: 'password is required' })
    .min(MIN_PASSWORD_LENGTH, `password must have at least ${MIN_PASSWORD_LENGTH} characters`)
    .max(MAX_PASSWORD_LENGTH, `password must have at most ${MAX_PASSWORD_LENGTH} characters`),
  systemAdmin: z.boolean().optional().describe('Whether the user is a system administrator when signed in with it; left out: unchanged (false for a new password)'),
});

/** Passwords for signing in at this service (docs/iam.md, "Signing in"); `wsm passwd` calls this. */
export function signInApiRoutes(signIn: SignInService): RouteDef[] {
  return [
    defineRoute({
      method: 'put', path: '/api/v1/users/{username}/password', tag: 'Sign-in', access: 'system-admin',
      summary: 'Set the password a user signs in with (system administrators); kept as a scrypt hash',
      description: 'The user signs in on the sign-in page (the command-line client, the console) with it. '
        + '`systemAdmin` says whether tokens of that sign-in make the user a system administrator.',
      params: z.object({ username }),
      body: passwordBody,
      responses: {
        200: { description: 'Set', data: z.object({ username: z.string(), systemAdmin: z.boolean() }) },
        400: { description: 'A password too short or too long' },
        403: { description: 'The caller is no system administrator' },
      },
      handler: async ({ params, body }) => ({ data: await signIn.accounts.setPassword(params.username, body.password, body.systemAdmin) }),
    }),
  ];
}
