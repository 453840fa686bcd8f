import { all, api, get, message, seg } from '../api.js';
import { failed, field, fill, h, loading, notice, table } from '../dom.js';
import type { PageContext } from '../main.js';
import type { Agent, Principal, Role, User } from '../types.js';

const principalName = (p: Principal) => ('username' in p.actor ? p.actor.username : p.actor.label);

/** Roles with their holders, assignment to users, agents with their fixed roles, and the member users. */
export async function iamPage(ctx: PageContext): Promise<void> {
  const base = `/api/v1/iam/${seg(ctx.workspace)}`;
  const status = notice();
  const rolesBox = h('div', { id: 'roles' });
  const agentsBox = h('div', { id: 'agents' });
  const usersBox = h('div', { id: 'users' });
  // Until the first answer: the boxes and the pickers say they are loading, and nothing can be assigned.
  const roleSelect = h('select', { id: 'assign-role', required: true, disabled: true }, h('option', { value: '' }, 'Loading…'));
  const userSelect = h('select', { id: 'assign-user', required: true, disabled: true }, h('option', { value: '' }, 'Loading…'));
  const assignButton = h('button', { type: 'submit', id: 'assign', disabled: true }, 'Assign');

  const load = async () => {
    const [roles, users, agents] = await Promise.all([all<Role>(`${base}/roles`), all<User>(`${base}/users`), all<Agent>(`${base}/agents`)]);
    const holders = await Promise.all(roles.map((r) => get<Principal[]>(`${base}/roles/${seg(r.id)}/assignees`).catch(() => [] as Principal[])));
    const agentRoles = await Promise.all(agents.map((a) => get<Role[]>(`${base}/agents/${seg(a.id)}/roles`).catch(() => [] as Role[])));
    const userRoles = await Promise.all(users.map((u) => get<Role[]>(`${base}/users/${seg(u.id)}/roles`).catch(() => [] as Role[])));
    const [chosenRole, chosenUser] = [roleSelect.value, userSelect.value];
    fill(roleSelect, roles.map((r) => h('option', { value: r.id, selected: r.id === chosenRole }, r.label)));
    fill(userSelect, users.map((u) => h('option', { value: u.id, selected: u.id === chosenUser }, u.username)));
    roleSelect.disabled = userSelect.disabled = assignButton.disabled = false;
    fill(rolesBox, roles.length ? table(['Role', 'Identifier', 'Description', 'Held by'], roles.map((r, i) => [
      h('strong', null, r.label), h('code', null, r.uri), r.description ?? '',
      holders[i]!.map((p) => h('span', { class: 'holder', 'data-role': r.label, 'data-principal': principalName(p) },
        `${principalName(p)} (${p.type.toLowerCase()})`,
        p.type === 'USER'
          ? h('button', {
            type: 'button', class: 'small link remove', title: 'Remove the role',
            onclick: async () => {
              try {
                await api('DELETE', `${base}/roles/${seg(r.id)}/assignees/principals/${seg(p.id)}`);
                status.show(`${principalName(p)} no longer holds ${r.label}.`, 'ok');
                await load();
              } catch (err) { status.show(message(err), 'error'); }
            },
          }, '×')
          : null)),
    ]), { id: 'roles-table' }) : h('p', { class: 'muted' }, 'No roles: install a package whose matrices declare some.'));
    fill(agentsBox, agents.length ? table(['Agent', 'Identifier', 'Description', 'Roles (fixed by the specification)'], agents.map((a, i) => [
      h('strong', null, a.label), h('code', null, a.uri), a.description ?? '', agentRoles[i]!.map((r) => h('span', { class: 'badge' }, r.label)),
    ])) : h('p', { class: 'muted' }, 'No agents.'));
    fill(usersBox, table(['User', 'E-mail', 'Roles'], users.map((u, i) => [
      h('strong', null, u.username), u.email ?? '', userRoles[i]!.map((r) => h('span', { class: 'badge' }, r.label)),
    ]), { id: 'users-table' }));
  };

  const assign = h('form', {
    class: 'card', id: 'assign-form',
    onsubmit: async (e: Event) => {
      e.preventDefault();
      const role = roleSelect.selectedOptions[0]?.textContent ?? '';
      const user = userSelect.selectedOptions[0]?.textContent ?? '';
      try {
        await api('POST', `${base}/roles/${seg(roleSelect.value)}/assignees/${seg(userSelect.value)}`);
        status.show(`${user} now holds ${role}.`, 'ok');
        await load();
      } catch (err) { status.show(message(err), 'error'); }
    },
  }, h('h2', null, 'Assign a role'), h('div', { class: 'row' }, field('Role', roleSelect), field('User', userSelect)), assignButton);

  fill(ctx.main, h('h1', null, 'Roles, agents and assignments'), status, assign,
    h('h2', null, 'Roles'), rolesBox, h('h2', null, 'Agents'), agentsBox, h('h2', null, 'Members'), usersBox);
  const boxes = [rolesBox, agentsBox, usersBox];
  for (const [box, what] of [[rolesBox, 'Loading the roles…'], [agentsBox, 'Loading the agents…'], [usersBox, 'Loading the members…']] as const) {
    fill(box, loading(what));
    box.setAttribute('aria-busy', 'true');
  }
  try {
    await load();
  } catch (err) {
    for (const box of boxes) fill(box, failed(err));
    fill(roleSelect);
    fill(userSelect);
  } finally {
    for (const box of boxes) box.removeAttribute('aria-busy');
  }
}
