import { expect } from 'chai';
import { SignInAttempts } from '../../../src/sign-in/attempts.js';

describe('SignInAttempts: failed sign-ins limited per user and per address', () => {
  let now = 1_000_000;
  const clock = () => now;
  const limits = { perUser: 3, perAddress: 5, windowMs: 60_000 };

  it('holds a user after the limit until the oldest failure leaves the window, from any address', () => {
    const a = new SignInAttempts(limits, clock);
    for (let i = 0; i < 3; i++) { expect(a.waitFor('Bob', `10.0.0.${i}`)).to.equal(0); a.failed('Bob', `10.0.0.${i}`); now += 1000; }
    expect(a.waitFor('bob', '10.9.9.9')).to.equal(60_000 - 3000);
    expect(a.waitFor('alice', '10.9.9.9')).to.equal(0);
    now += 60_000 - 4000;
    expect(a.waitFor('bob', '10.9.9.9')).to.equal(1000);
    now += 1000;
    expect(a.waitFor('bob', '10.9.9.9')).to.equal(0);
  });

  it('holds an address that fails for many users, whoever it tries next', () => {
    const a = new SignInAttempts(limits, clock);
    for (let i = 0; i < 5; i++) a.failed(`user-${i}`, '10.1.1.1');
    expect(a.waitFor('someone-new', '10.1.1.1')).to.be.greaterThan(0);
    expect(a.waitFor('someone-new', '10.1.1.2')).to.equal(0);
  });

  it('forgets a user\'s failures when they sign in, not the address\'s', () => {
    const a = new SignInAttempts(limits, clock);
    for (let i = 0; i < 3; i++) a.failed('carol', '10.2.2.2');
    a.succeeded('carol');
    expect(a.waitFor('carol', '10.3.3.3')).to.equal(0);
    a.failed('dave', '10.2.2.2');
    a.failed('erin', '10.2.2.2');
    expect(a.waitFor('frank', '10.2.2.2')).to.be.greaterThan(0);
  });
});
