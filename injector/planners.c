/*
 * Which entry-point planner (injector/patch.h): every CPU's is linked;
 * the ELF machine picks one, this build's CPU the native one.
 */
#include "injector/arch.h"
#include "injector/patch.h"

#include <elf.h>
#include <stddef.h>

const struct patch_planner *patch_planner_of(unsigned int e_machine)
{
	static const struct patch_planner *const all[] = {
		&patch_planner_x86_64,
		&patch_planner_aarch64,
	};
	size_t i;

	for (i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (all[i]->e_machine == e_machine)
			return all[i];
	return NULL;
}

const struct patch_planner *patch_native(void)
{
	return patch_planner_of(arch_e_machine);
}
