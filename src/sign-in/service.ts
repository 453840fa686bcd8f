import type Provider from 'oidc-provider';
import type { QuadStore } from '../store/store.js';
import type { Graphs } from '../rdf/graphs.js';
import type { UserService } from '../users/service.js';
import type { Logger } from '../logger.js';
import { StoreAdapterFactory } from './store-adapter.js';
import { loadSignInKeys, type SignInKeys } from './keys.js';
import { PasswordAccounts } from './accounts.js';
import { SignInAttempts } from './attempts.js';
import { createProvider, type AccountClaims } from './provider.js';

export interface RunningProvider {
  provider: Provider;
  issuer: string;
  /** The provider's request handler (a Koa app's callback). */
  handle: ReturnType<Provider['callback']>;
}

/** How often expired sign-in records are removed from the store. */
const SWEEP_INTERVAL_MS = 10 * 60_000;

export interface SignInSettings {
  cliClientId: string;
  accessTokenTtl: number;
  /** The upstream issuer people sign in at instead (WSM_OIDC_ISSUER); no provider runs here then. */
  upstreamIssuer?: string | undefined;
}

/**
 * Sign-in at this service: password accounts, the failed-attempt limits,
 * and the OpenID provider. `prepare` reads (or makes) the provider's keys
 * before the server listens; `start` builds the provider once the service's
 * public address is known (a test server's port is chosen when it listens).
 */
export class SignInService {
  readonly accounts: PasswordAccounts;
  readonly attempts = new SignInAttempts();
  private readonly adapters: StoreAdapterFactory;
  private keys: SignInKeys | undefined;
  private current: RunningProvider | undefined;
  private sweeper: NodeJS.Timeout | undefined;

  constructor(
    store: QuadStore,
    graphs: Graphs,
    private readonly users: UserService,
    private readonly logger: Logger,
    readonly settings: SignInSettings,
  ) {
    this.accounts = new PasswordAccounts(store, graphs);
    this.adapters = new StoreAdapterFactory(store, graphs);
  }

  /** Whether this service runs its own provider (no upstream issuer is configured). */
  get local(): boolean { return !this.settings.upstreamIssuer; }

  /** Reads the provider's keys from the store (made on the first start); none with an upstream issuer. */
  async prepare(): Promise<SignInKeys | undefined> {
    if (!this.local) return undefined;
    this.keys ??= await loadSignInKeys(this.adapters.store, this.adapters.graphs);
    return this.keys;
  }

  /** Builds the provider for the service's public address and starts removing expired records. */
  start(issuer: string): void {
    if (!this.local) return;
    if (!this.keys) throw new Error('SignInService.prepare must run before start');
    const provider = createProvider({
      issuer, cliClientId: this.settings.cliClientId, accessTokenTtl: this.settings.accessTokenTtl,
      keys: this.keys, adapters: this.adapters, claims: this.claims,
    });
    provider.on('server_error', (_ctx, err) => this.logger.error({ err }, 'the sign-in provider failed'));
    this.current = { provider, issuer, handle: provider.callback() };
    this.sweeper = setInterval(() => { this.adapters.sweep().catch((err: unknown) => this.logger.warn({ err }, 'could not remove expired sign-in records')); }, SWEEP_INTERVAL_MS);
    this.sweeper.unref();
  }

  stop(): void {
    clearInterval(this.sweeper);
  }

  /** The running provider and its issuer; undefined before `start` or with an upstream issuer. */
  get provider(): RunningProvider | undefined { return this.current; }

  /** A user's claims for the provider: only users with a password may sign in here. */
  readonly claims: AccountClaims = async (username) => {
    const account = await this.accounts.account(username);
    if (!account) return undefined;
    const user = await this.users.get({ username });
    const name = [user?.firstName, user?.lastName].filter(Boolean).join(' ');
    return {
      sub: username,
      preferred_username: username,
      wsm_system_admin: account.systemAdmin,
      ...(user?.email ? { email: user.email, email_verified: user.emailVerified } : {}),
      ...(user?.firstName ? { given_name: user.firstName } : {}),
      ...(user?.lastName ? { family_name: user.lastName } : {}),
      ...(name ? { name } : {}),
      ...(user?.website ? { website: user.website } : {}),
    };
  };
}
