/*
 * The sampler's image (sampler/image/image.mk builds it from
 * sampler/image/records.c), carried in memsnap's own read-only data to be
 * copied into targets by sampler/sampler.c.
 */
	.section .rodata
	.balign 64
	.globl sampler_image
	.hidden sampler_image
sampler_image:
	.incbin SAMPLER_IMG
sampler_image_end:
	.balign 8
	.globl sampler_image_len
	.hidden sampler_image_len
sampler_image_len:
	.quad sampler_image_end - sampler_image

	.section .note.GNU-stack, "", %progbits
