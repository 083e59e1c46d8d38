# The built-in demo target: a small program on Debian's jemalloc.
$(B)/demo/memsnap-demo: demo/memsnap-demo.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O1 -g -fno-omit-frame-pointer -Wall -o $@ $< \
		-ljemalloc -lpthread

demo: $(B)/demo/memsnap-demo
